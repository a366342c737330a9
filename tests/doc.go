// Package tests holds the integration tests of lualock: the generated
// script wrappers, the reentrant lock and the fair lock, each run on
// miniredis, a real standalone redis-server and a real 3-master Redis
// Cluster started by the harness package.
package tests
