package failover

import (
	"testing"

	"github.com/lualock/lualock/tests/internal/backends"
)

func TestMain(m *testing.M) { backends.Main(m) }
