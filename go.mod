module github.com/lualock/lualock

go 1.24.0

require (
	github.com/alicebob/miniredis/v2 v2.40.0
	github.com/lualock/lualock/cmd/luagen v0.0.0
	github.com/lualock/lualock/luart v0.0.0
	github.com/redis/go-redis/v9 v9.22.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/yuin/gopher-lua v1.1.2 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	golang.org/x/mod v0.33.0 // indirect
	golang.org/x/sync v0.19.0 // indirect
	golang.org/x/sys v0.41.0 // indirect
	golang.org/x/tools v0.42.0 // indirect
)

// luart and luagen are modules of this repository. Until each is tagged
// and published (docs/RELEASING.md), the lualock module builds them from
// their folders; a published lualock requires their tagged versions, and
// these replace directives apply only inside this repository.
replace (
	github.com/lualock/lualock/cmd/luagen => ./cmd/luagen
	github.com/lualock/lualock/luart => ./luart
)

tool github.com/lualock/lualock/cmd/luagen
