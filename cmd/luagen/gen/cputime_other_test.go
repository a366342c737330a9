//go:build !unix

package gen

import "time"

// cpuTime is not measured here: the benchmark's cpu-s/op is then 0.
func cpuTime() time.Duration { return 0 }
