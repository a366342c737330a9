package track

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// The tracking connection speaks RESP3 itself: go-redis reads a
// connection's push messages only when a command of its own waits for a
// reply, and an invalidation must be read the moment it comes.

// value is one RESP3 reply: an integer, a string (simple, bulk or
// verbatim), an error, an array (array, set, push), or null.
type value struct {
	kind  byte // ':' integer, '$' string, '-' error, '*' array, '>' push, '_' null
	int   int64
	str   string
	elems []value
}

// any returns v as Go values: an int64, a string, nil, a []any of them
// (an error reply as its text).
func (v value) any() any {
	switch v.kind {
	case ':':
		return v.int
	case '$', '-':
		return v.str
	case '*', '>':
		a := make([]any, len(v.elems))
		for i, e := range v.elems {
			a[i] = e.any()
		}
		return a
	}
	return nil
}

// errProto is a reply the tracker cannot read.
var errProto = errors.New("track: protocol error")

func readValue(r *bufio.Reader) (value, error) {
	line, err := readLine(r)
	if err != nil {
		return value{}, err
	}
	if len(line) == 0 {
		return value{}, errProto
	}
	body := line[1:]
	switch line[0] {
	case '+':
		return value{kind: '$', str: body}, nil
	case '-', '!':
		if line[0] == '!' {
			s, err := readBulk(r, body)
			return value{kind: '-', str: s}, err
		}
		return value{kind: '-', str: body}, nil
	case ':':
		n, err := strconv.ParseInt(body, 10, 64)
		if err != nil {
			return value{}, fmt.Errorf("%w: integer %q", errProto, body)
		}
		return value{kind: ':', int: n}, nil
	case '$', '=':
		if body == "-1" {
			return value{kind: '_'}, nil
		}
		s, err := readBulk(r, body)
		return value{kind: '$', str: s}, err
	case '_':
		return value{kind: '_'}, nil
	case '#', ',', '(':
		return value{kind: '$', str: body}, nil
	case '*', '~', '>', '%', '|':
		n, err := strconv.Atoi(body)
		if err != nil {
			return value{}, fmt.Errorf("%w: length %q", errProto, body)
		}
		if n < 0 {
			return value{kind: '_'}, nil
		}
		if line[0] == '%' || line[0] == '|' {
			n *= 2
		}
		v := value{kind: '*', elems: make([]value, n)}
		if line[0] == '>' {
			v.kind = '>'
		}
		for i := range v.elems {
			if v.elems[i], err = readValue(r); err != nil {
				return value{}, err
			}
		}
		if line[0] == '|' { // attributes precede the reply they describe
			return readValue(r)
		}
		return v, nil
	}
	return value{}, fmt.Errorf("%w: type %q", errProto, line[0])
}

func readLine(r *bufio.Reader) (string, error) {
	b, err := r.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return "", errProto
		}
		return "", err
	}
	if len(b) < 2 || b[len(b)-2] != '\r' {
		return "", errProto
	}
	return string(b[:len(b)-2]), nil
}

func readBulk(r *bufio.Reader, n string) (string, error) {
	size, err := strconv.Atoi(n)
	if err != nil || size < 0 {
		return "", fmt.Errorf("%w: bulk length %q", errProto, n)
	}
	b := make([]byte, size+2)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", err
	}
	return string(b[:size]), nil
}

// writeCmd writes one command as an array of bulk strings.
func writeCmd(w *bufio.Writer, args ...string) {
	var num [20]byte
	w.WriteByte('*')
	w.Write(strconv.AppendInt(num[:0], int64(len(args)), 10))
	w.WriteString("\r\n")
	for _, a := range args {
		w.WriteByte('$')
		w.Write(strconv.AppendInt(num[:0], int64(len(a)), 10))
		w.WriteString("\r\n")
		w.WriteString(a)
		w.WriteString("\r\n")
	}
}
