package pipe

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
)

// errProto is a reply the pipe cannot read: the connection is dropped.
var errProto = errors.New("pipe: protocol error")

// readReply reads one reply as go-redis's Cmd gives it (see Pipe.Do);
// push messages before it are skipped.
func readReply(r *bufio.Reader) (v any, isNil bool, err error) {
	for {
		kind, line, err := readLine(r)
		if err != nil {
			return nil, false, err
		}
		if kind == '>' {
			if _, _, err := readAggregate(r, kind, line); err != nil {
				return nil, false, err
			}
			continue
		}
		return readValue(r, kind, line)
	}
}

// readValue reads the value whose first line is kind and line.
func readValue(r *bufio.Reader, kind byte, line []byte) (any, bool, error) {
	switch kind {
	case '+':
		return string(line), false, nil
	case '-':
		return ReplyError(line), false, nil
	case ':':
		n, err := parseInt(line)
		return n, false, err
	case '$', '=', '!':
		n, err := parseInt(line)
		if err != nil {
			return nil, false, err
		}
		if n < 0 {
			return nil, true, nil
		}
		b, err := readBulk(r, n)
		if err != nil {
			return nil, false, err
		}
		switch kind {
		case '!':
			return ReplyError(b), false, nil
		case '=':
			if len(b) >= 4 && b[3] == ':' {
				b = b[4:] // the format, "txt:"
			}
		}
		return string(b), false, nil
	case '_':
		return nil, true, nil
	case '#':
		return len(line) == 1 && line[0] == 't', false, nil
	case ',':
		switch string(line) {
		case "inf":
			return math.Inf(1), false, nil
		case "-inf":
			return math.Inf(-1), false, nil
		}
		f, err := strconv.ParseFloat(string(line), 64)
		if err != nil {
			return nil, false, fmt.Errorf("%w: double %q", errProto, line)
		}
		return f, false, nil
	case '(':
		n, ok := new(big.Int).SetString(string(line), 10)
		if !ok {
			return nil, false, fmt.Errorf("%w: big number %q", errProto, line)
		}
		return n, false, nil
	case '*', '~', '%', '|':
		return readAggregate(r, kind, line)
	}
	return nil, false, fmt.Errorf("%w: type %q", errProto, kind)
}

// readAggregate reads an array, a set, a push (as a []any), a map (as a
// map[any]any) or attributes (skipped, with the value they precede).
func readAggregate(r *bufio.Reader, kind byte, line []byte) (any, bool, error) {
	n, err := parseInt(line)
	if err != nil {
		return nil, false, err
	}
	if n < 0 {
		return nil, true, nil
	}
	if n > 1<<24 {
		return nil, false, fmt.Errorf("%w: length %d", errProto, n)
	}
	if kind == '%' || kind == '|' {
		m := make(map[any]any, n)
		for range n {
			k, err := element(r)
			if err != nil {
				return nil, false, err
			}
			v, err := element(r)
			if err != nil {
				return nil, false, err
			}
			if isHashable(k) {
				m[k] = v
			}
		}
		if kind == '|' {
			return readReply(r)
		}
		return m, false, nil
	}
	a := make([]any, n)
	for i := range a {
		if a[i], err = element(r); err != nil {
			return nil, false, err
		}
	}
	return a, false, nil
}

// element reads an element of an aggregate: a null is nil.
func element(r *bufio.Reader) (any, error) {
	v, _, err := readReply(r)
	return v, err
}

func isHashable(v any) bool {
	switch v.(type) {
	case []any, map[any]any:
		return false
	}
	return true
}

// readLine reads a line: its type byte and the rest, without CRLF. The
// rest is valid until the next read.
func readLine(r *bufio.Reader) (byte, []byte, error) {
	b, err := r.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return 0, nil, fmt.Errorf("%w: line too long", errProto)
		}
		return 0, nil, err
	}
	if len(b) < 3 || b[len(b)-2] != '\r' {
		return 0, nil, fmt.Errorf("%w: line %q", errProto, b)
	}
	return b[0], b[1 : len(b)-2], nil
}

func parseInt(b []byte) (int64, error) {
	if len(b) == 0 || len(b) > 18 {
		n, err := strconv.ParseInt(string(b), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%w: integer %q", errProto, b)
		}
		return n, nil
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
		if len(b) == 0 {
			return 0, fmt.Errorf("%w: integer %q", errProto, "-")
		}
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%w: integer %q", errProto, b)
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, nil
}

func readBulk(r *bufio.Reader, n int64) ([]byte, error) {
	if n > 512<<20 {
		return nil, fmt.Errorf("%w: bulk length %d", errProto, n)
	}
	b := make([]byte, n+2)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	if b[n] != '\r' || b[n+1] != '\n' {
		return nil, fmt.Errorf("%w: bulk not ended by CRLF", errProto)
	}
	return b[:n], nil
}

// appendCmd appends a command of string arguments.
func appendCmd(b []byte, args ...string) []byte {
	b = AppendArrayLen(b, len(args))
	for _, a := range args {
		b = AppendString(b, a)
	}
	return b
}

// AppendArrayLen appends the header of a command of n arguments.
func AppendArrayLen(b []byte, n int) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(n), 10)
	return append(b, '\r', '\n')
}

// AppendString appends one argument.
func AppendString(b []byte, s string) []byte {
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, '\r', '\n')
	b = append(b, s...)
	return append(b, '\r', '\n')
}

// AppendBytes appends one argument.
func AppendBytes(b []byte, s []byte) []byte {
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, '\r', '\n')
	b = append(b, s...)
	return append(b, '\r', '\n')
}
