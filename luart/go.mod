// Module luart is the runtime of the Go code luagen generates. It is a
// module of its own, with go-redis as its only dependency, at the lowest
// go-redis v9 and Go versions it is tested with (see docs/RELEASING.md),
// so that adding generated code to a module never raises its go-redis or
// Go version.
module github.com/lualock/lualock/luart

go 1.18

require github.com/redis/go-redis/v9 v9.0.0

require (
	github.com/cespare/xxhash/v2 v2.2.0 // indirect
	github.com/dgryski/go-rendezvous v0.0.0-20200823014737-9f7001d12a5f // indirect
)
