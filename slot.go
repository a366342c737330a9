package lualock

import "github.com/lualock/lualock/internal/keys"

// slot returns the Redis Cluster hash slot of key (keys.Slot).
func slot(key string) int { return keys.Slot(key) }
