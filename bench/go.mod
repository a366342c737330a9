module github.com/lualock/lualock/bench

go 1.24.0

require (
	github.com/bsm/redislock v0.9.4
	github.com/go-redsync/redsync/v4 v4.15.0
	github.com/lualock/lualock v0.0.0
	github.com/lualock/lualock/extra/lualockrueidis v0.0.0
	github.com/redis/go-redis/v9 v9.22.0
	github.com/redis/rueidis v1.0.69
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/hashicorp/errwrap v1.1.0 // indirect
	github.com/hashicorp/go-multierror v1.1.1 // indirect
	github.com/lualock/lualock/luart v0.0.0 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	golang.org/x/sys v0.41.0 // indirect
)

replace (
	github.com/lualock/lualock => ..
	github.com/lualock/lualock/cmd/luagen => ../cmd/luagen
	github.com/lualock/lualock/extra/lualockrueidis => ../extra/lualockrueidis
	github.com/lualock/lualock/luart => ../luart
)
