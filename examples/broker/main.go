// Command broker is the model host: a small log broker with an HTTP API
// on cutline. Its server is package node (node/doc.go walks through it
// file by file); the takeover demonstration is the program in demo.
package main

import (
	"os"

	"github.com/cutline/cutline/examples/broker/node"
)

func main() { os.Exit(node.Run(os.Args[1:], os.Getenv, os.Stderr)) }
