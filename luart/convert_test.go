package luart_test

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lualock/lualock/luart"
)

func TestConvert(t *testing.T) {
	s := &luart.Script{Name: "x"}
	if n, err := luart.Convert(s, int64(7), nil, luart.AsInt); n != 7 || err != nil {
		t.Errorf("Convert(7) = %v, %v", n, err)
	}
	// redis.Nil is a nil reply.
	if p, err := luart.Convert(s, nil, redis.Nil, luart.Nullable(luart.AsInt)); p != nil || err != nil {
		t.Errorf("Convert(nil) = %v, %v", p, err)
	}
	if b, err := luart.Convert(s, nil, redis.Nil, luart.AsBool); b || err != nil {
		t.Errorf("Convert(nil) as bool = %v, %v", b, err)
	}
	// A Redis error and a conversion error come wrapped once, naming the script.
	_, err := luart.Convert(s, nil, io.EOF, luart.AsInt)
	var se *luart.Error
	if !errors.As(err, &se) || se.Script != "x" || !errors.Is(err, io.EOF) || err.Error() != "lua script x: EOF" {
		t.Errorf("Convert(EOF) = %v", err)
	}
	if _, again := luart.Convert(s, nil, err, luart.AsInt); again != err {
		t.Errorf("Convert of the script's own *Error = %v, want it as is", again)
	}
	if _, err := luart.Convert(s, "str", nil, luart.AsInt); err == nil || !strings.HasPrefix(err.Error(), "lua script x: reply") {
		t.Errorf("Convert(string) as int = %v", err)
	}
}

func TestConverters(t *testing.T) {
	arr := luart.ArrayOf(luart.Nullable(luart.AsString))
	got, err := arr([]any{"a", nil, "b"})
	if err != nil || len(got) != 3 || *got[0] != "a" || got[1] != nil || *got[2] != "b" {
		t.Errorf("ArrayOf(Nullable(AsString)) = %v, %v", got, err)
	}
	if got, err := arr(nil); got != nil || err != nil {
		t.Errorf("ArrayOf(nil) = %v, %v", got, err)
	}
	if _, err := luart.ArrayOf(luart.AsInt)([]any{int64(1), "x"}); err == nil || !strings.Contains(err.Error(), "element 2") {
		t.Errorf("ArrayOf with a bad element = %v", err)
	}
	if _, err := luart.ArrayOf(luart.AsInt)("x"); err == nil {
		t.Error("ArrayOf(string): no error")
	}
	for _, c := range []struct {
		v    any
		want bool
		ok   bool
	}{{nil, false, true}, {int64(1), true, true}, {int64(0), false, true}, {"1", false, false}} {
		if b, err := luart.AsBool(c.v); b != c.want || (err == nil) != c.ok {
			t.Errorf("AsBool(%#v) = %v, %v", c.v, b, err)
		}
	}
	if v, err := luart.AsAny([]any{int64(1)}); !reflect.DeepEqual(v, []any{int64(1)}) || err != nil {
		t.Errorf("AsAny = %v, %v", v, err)
	}
	if _, err := luart.AsNil("anything"); err != nil {
		t.Errorf("AsNil: %v", err)
	}
	if s, err := luart.AsString("ok"); s != "ok" || err != nil {
		t.Errorf("AsString = %v, %v", s, err)
	}
}

func TestCheckKeyPrefix(t *testing.T) {
	for _, c := range []struct {
		prefix string
		keys   []string
		ok     bool
	}{
		{"{q}:", []string{"{q}:job"}, true},
		{"{q}:", nil, true},
		{"q:", []string{"q:job"}, false},
		{"{}:", []string{"{}:job"}, false},
		{"{q}:", []string{"{r}:job"}, false},
		{"{q}:", []string{"job"}, false},
	} {
		err := luart.CheckKeyPrefix("prefix", c.prefix, c.keys)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, luart.ErrKeyPrefix)) {
			t.Errorf("CheckKeyPrefix(%q, %q) = %v, want ok %v", c.prefix, c.keys, err, c.ok)
		}
	}
}
