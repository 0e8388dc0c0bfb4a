// Command gen writes the hostile corpus (package hostile) as one YAML
// stream of JSON documents on stdout, for the render-budget fault
// scenario: go run ./test/hostile/gen > hostile.yaml.
package main

import (
	"os"

	"stencil.dev/stencil/test/hostile"
)

func main() {
	for i, c := range hostile.Cases() {
		if i > 0 {
			os.Stdout.WriteString("\n---\n")
		}
		os.Stdout.Write(c.Resource())
	}
	os.Stdout.WriteString("\n")
}
