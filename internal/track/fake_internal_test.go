package track

import (
	"bufio"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// fakeNode serves the tracker's protocol on a loopback port of its own
// until the test ends: answer returns the raw reply to each command ("" for
// none). accepted counts the connections it took.
func fakeNode(t *testing.T, answer func(cmd []value) string) (addr string, accepted *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted = new(atomic.Int64)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := bufio.NewReader(c)
				for {
					v, err := readValue(r)
					if err != nil || len(v.elems) == 0 {
						return
					}
					if reply := answer(v.elems); reply != "" {
						if _, err := c.Write([]byte(reply)); err != nil {
							return
						}
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), accepted
}
