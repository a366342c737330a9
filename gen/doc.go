// Package gen is the library behind the luagen command: it lints Redis Lua
// scripts and generates typed Go wrappers for them.
//
// Lint(fsys, cfg) parses every script under cfg.Src in fsys (one script per
// .lua file, with a header declaring its KEYS, ARGV, return and flags) and
// returns its findings as Diagnostics. Generate(fsys, cfg) runs the same
// checks and, when none is an error, returns the Go files to write, by file
// name: one <base>_lua.go per script plus the shared SharedFile. The package
// never prints, exits or writes files; cmd/luagen does that.
package gen
