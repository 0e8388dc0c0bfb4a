// Command gen writes the hostile corpus (package hostile) as one YAML
// stream of JSON documents on stdout, for the render-budget fault
// scenario: gen [-skip NAME,...] > hostile.yaml. -names lists the cases'
// names and kinds instead.
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"stencil.dev/stencil/test/hostile"
)

func main() {
	skip := flag.String("skip", "", "comma-separated `names` of cases to leave out")
	names := flag.Bool("names", false, "print each case's kind and name, one per line, instead of the resources")
	flag.Parse()
	left := strings.Split(*skip, ",")
	n := 0
	for _, c := range hostile.Cases() {
		if slices.Contains(left, c.Name) {
			continue
		}
		if *names {
			fmt.Println(strings.ToLower(c.Kind), c.Name)
			continue
		}
		if n > 0 {
			os.Stdout.WriteString("\n---\n")
		}
		n++
		os.Stdout.Write(c.Resource())
	}
	if !*names {
		os.Stdout.WriteString("\n")
	}
}
