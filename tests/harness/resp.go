package harness

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// commandAuth sends one command to addr over a fresh connection, after
// AUTH password unless password is "", and returns the decoded reply:
// string (simple or bulk), int64, nil, []any, or an error for a RESP error
// reply. It deliberately avoids go-redis so that readiness probes leave no
// pools or goroutines behind.
func commandAuth(addr, password string, timeout time.Duration, args ...string) (any, error) {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return nil, err
	}
	var b strings.Builder
	write := func(args ...string) {
		fmt.Fprintf(&b, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
		}
	}
	if password != "" {
		write("AUTH", password)
	}
	write(args...)
	if _, err := io.WriteString(conn, b.String()); err != nil {
		return nil, err
	}
	r := bufio.NewReader(conn)
	if password != "" {
		if _, err := readReply(r); err != nil {
			return nil, fmt.Errorf("%s: AUTH: %w", addr, err)
		}
	}
	return readReply(r)
}

// commandString is command for replies that must be a (simple or bulk) string.
func commandString(addr string, timeout time.Duration, args ...string) (string, error) {
	return commandStringAuth(addr, "", timeout, args...)
}

// commandStringAuth is commandString with commandAuth's password.
func commandStringAuth(addr, password string, timeout time.Duration, args ...string) (string, error) {
	v, err := commandAuth(addr, password, timeout, args...)
	if err != nil {
		return "", err
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%s: unexpected reply %T to %s", addr, v, args[0])
	}
	return s, nil
}

type respError string

func (e respError) Error() string { return string(e) }

func readReply(r *bufio.Reader) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("malformed RESP line %q", line)
	}
	kind, body := line[0], line[1:len(line)-2]
	switch kind {
	case '+':
		return body, nil
	case '-':
		return nil, respError(body)
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil {
			return nil, err
		}
		if n < 0 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil {
			return nil, err
		}
		if n < 0 {
			return nil, nil
		}
		out := make([]any, n)
		for i := range out {
			if out[i], err = readReply(r); err != nil {
				return nil, err
			}
		}
		return out, nil
	default:
		return nil, errors.New("unsupported RESP type " + strconv.QuoteRune(rune(kind)))
	}
}

// infoField extracts "field:value" from an INFO / CLUSTER INFO payload.
func infoField(info, field string) string {
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimRight(line, "\r")
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v
		}
	}
	return ""
}
