// Package docs holds no code: it is the home of the project's documentation
// (this folder and the README), and its test checks that every Go snippet
// in them compiles.
package docs
