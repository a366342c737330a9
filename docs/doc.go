// Package docs holds no code: it is the home of the project's documentation
// (this folder and the README). Its tests check that every Go snippet in
// them compiles, and that the repository stands alone: no path of a
// developer's machine, no file outside the repository and no issue number
// in its comments and documents (make check runs that one).
package docs
