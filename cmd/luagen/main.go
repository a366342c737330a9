// Command luagen lints the Redis Lua scripts of a folder and generates typed
// Go wrappers for them (package github.com/lualock/lualock/cmd/luagen/gen).
//
// Usage:
//
//	luagen [command] [flags]
//
// The commands are:
//
//	generate  lint the scripts and write the Go package (the default)
//	check     report generated files that are stale or orphaned; writes nothing
//	lint      print every finding about the scripts
//	list      print each script's name, file, SHA1, keys, args, return and flags
//	load      SCRIPT LOAD every script into Redis and verify its SHA1
//	help      print the usage
//	version   print the version luagen was built from (also --version)
//
// Every command takes these flags:
//
//	-src dir   the folder of .lua files (default "lua")
//	-out dir   the folder of the generated package (default "generated")
//	-pkg name  the package name of the generated files (default: the base
//	           name of -out); a Go identifier other than _, a keyword, main
//	           or init
//	-config f  the luagen.json to read (default: the nearest one at or
//	           above -src, or the working directory, up to the module root)
//
// luagen.json (see docs/LUAGEN.md and docs/luagen.schema.json) sets src,
// out and package for every command, where no flag sets them, rule
// severities per project and per file pattern, key-prefix args and a Redis
// Functions library to build every script into. lint and check take
// -format text|json|sarif|github: in the machine formats the findings (and
// check's stale and orphaned files) go to stdout.
//
// list takes -json to print a JSON array instead of a table. load takes
// -replace (FUNCTION LOAD REPLACE for a Functions library), -addr
// (redis://host:port[/db], rediss://..., or plain host:port; default
// $REDIS_URL, else redis://127.0.0.1:6379), -cluster (treat -addr as the
// seed of a Redis Cluster: a comma-separated list of host:port, or a
// redis:// URL with more seeds as addr= parameters; every node of the
// cluster, each master included, gets the scripts) and -timeout (default
// 10s, bounding the whole load).
//
// -src and -out are relative to the working directory, or absolute. The paths
// recorded in the generated code (Script.File, the "source:" comments) are
// relative to the module root, the nearest folder at or above -src that holds
// a go.mod, so they do not depend on where luagen runs; without a go.mod they
// are relative to the working directory when -src is inside it, and to the
// parent of -src otherwise. Diagnostics print paths relative to the working
// directory, as file:line:col: rule: message.
//
// generate writes each file atomically (a temporary file in the output folder,
// then a rename), leaves files whose content is unchanged untouched, creates
// the output folder when missing, and removes generated files whose .lua is
// gone: files named *_lua.go or luagen.go that start with luagen's "Code
// generated" header. It never removes or overwrites a file luagen did not
// write. Warnings are printed but do not fail the run.
//
// check regenerates in memory and prints a unified diff (on stdout) for every
// file that is stale or missing, names orphaned generated files, and exits 1
// when anything would change. It prints nothing when all is up to date.
//
// Exit status: 0 on success, 1 on errors or findings of error severity (and
// for check, stale or orphaned files; for load, any script that failed), 2
// for a usage error.
//
// In a module that uses the scripts, run it from a go:generate line in a
// _test.go file of the generated package (go generate reads a package's
// test files last, so a generated file luagen removes is not one it has yet
// to open), for example:
//
//	//go:generate go run github.com/lualock/lualock/cmd/luagen generate -src ../lua -out .
//
// A directive in a package that go generate ./... visits before the
// generated one (the module root's, for instance) fails once after a
// script is deleted: go generate cannot open the file luagen removed.
//
// With Go 1.24 tool dependencies, add it once with
//
//	go get -tool github.com/lualock/lualock/cmd/luagen
//
// and run it as "go tool luagen check" (for example in CI) or from
// "//go:generate go tool luagen generate".
package main

import "os"

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }
