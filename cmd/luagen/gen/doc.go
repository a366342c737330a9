// Package gen is the library behind the luagen command: it lints Redis Lua
// scripts and generates typed Go wrappers for them.
//
// Lint(fsys, cfg) parses every script under cfg.Src in fsys (one script per
// .lua file, with a header declaring its KEYS, ARGV, return and flags) and
// returns its findings as Diagnostics. Generate(fsys, cfg) runs the same
// checks and, when none is an error, returns the Go files to write, by file
// name: one <base>_lua.go per script plus the shared SharedFile (Scripts and
// LoadAll). The generated code imports the runtime package
// github.com/lualock/lualock/luart (running, retrying, loading and
// converting) instead of carrying a copy of it. The package never prints,
// exits or writes files; cmd/luagen does that.
package gen
