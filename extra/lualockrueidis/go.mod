module github.com/lualock/lualock/extra/lualockrueidis

go 1.24.0

require (
	github.com/lualock/lualock v0.0.0
	github.com/redis/go-redis/v9 v9.22.0
	github.com/redis/rueidis v1.0.69
)

require go.uber.org/goleak v1.3.0 // indirect

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/lualock/lualock/luart v0.0.0 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	golang.org/x/sys v0.41.0 // indirect
)

// Inside this repository the module builds against the lualock next to it.
// A user's go.mod does not apply this replace: it needs a published lualock
// version in the require above (see docs/RELEASING.md).
replace (
	github.com/lualock/lualock => ../..
	github.com/lualock/lualock/cmd/luagen => ../../cmd/luagen
	github.com/lualock/lualock/luart => ../../luart
)
