package luart_test

import (
	"errors"
	"fmt"

	"github.com/lualock/lualock/luart"
)

// notFound stands for the error reply of a script's
// redis.error_reply('NOT FOUND'), as go-redis returns it (a redis.Error).
type notFound struct{}

func (notFound) Error() string { return "NOT FOUND" }
func (notFound) RedisError()   {}

// Code that compared err.Error() with a script's error text before luagen
// tests the cause instead: the wrappers' errors are *luart.Error, which
// name the script and wrap what go-redis returned.
func ExampleError() {
	// What a generated wrapper returns when get_task_info replies with
	// redis.error_reply('NOT FOUND').
	var err error = &luart.Error{Script: "get_task_info", Err: notFound{}}

	fmt.Println(err)                        // the wrapper's text
	fmt.Println(err.Error() == "NOT FOUND") // the old comparison no longer matches
	var se *luart.Error
	if errors.As(err, &se) {
		fmt.Println(se.Script, se.Err.Error() == "NOT FOUND") // Redis's text is the cause's
	}
	// Output:
	// lua script get_task_info: NOT FOUND
	// false
	// get_task_info true
}
