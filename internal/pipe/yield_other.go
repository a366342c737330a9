//go:build unix && !linux

package pipe

// yield does nothing: a spin relies on its backoff alone here.
func yield() {}
