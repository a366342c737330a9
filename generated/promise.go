// Package generated, as lualock builds it, is lualock's own internals: its
// wrappers are exported only because tools outside the lualock module (the
// bench's fair-queue depth probe) call the scripts directly. They carry no
// compatibility promise and change with the scripts in any release.
// Applications use package lualock; a repository with scripts of its own
// runs luagen on them and keeps the output in an internal package (as the
// README shows).
package generated
