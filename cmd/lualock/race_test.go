//go:build race && unix

package main

func init() { raceBuild = true }
