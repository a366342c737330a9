// Module github.com/lualock/lualock/cmd/luagen is luagen, the generator
// (package gen) and its command. It is a module of its own so that its
// dependencies (gopher-lua, x/tools) never enter the build of a module
// that uses the generated code, which needs only luart. Its go-redis (for
// luagen load) is luart's floor, so that a tool line for it in a module's
// go.mod raises nothing either (see docs/RELEASING.md).
module github.com/lualock/lualock/cmd/luagen

go 1.24.0

require (
	github.com/alicebob/miniredis/v2 v2.40.0
	github.com/lualock/lualock/luart v0.0.0-00010101000000-000000000000
	github.com/redis/go-redis/v9 v9.0.4
	github.com/yuin/gopher-lua v1.1.2
	golang.org/x/tools v0.42.0
)

require (
	github.com/cespare/xxhash/v2 v2.2.0 // indirect
	github.com/dgryski/go-rendezvous v0.0.0-20200823014737-9f7001d12a5f // indirect
	golang.org/x/mod v0.33.0 // indirect
	golang.org/x/sync v0.19.0 // indirect
)

replace github.com/lualock/lualock/luart => ../../luart
