// Command variants prints every planted variant of internal/planted, one
// a line: its name, then the packages whose own tests catch it
// (Bug.CaughtBy), separated by spaces. scripts/planted.sh reads it.
package main

import (
	"fmt"
	"strings"

	"github.com/cutline/cutline/internal/planted"
)

func main() {
	for _, b := range planted.All {
		fmt.Println(b.String(), strings.Join(b.CaughtBy(), " "))
	}
}
