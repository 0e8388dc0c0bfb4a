// Command gen writes the hostile corpus (package hostile) as one YAML
// stream of JSON documents on stdout, for the render-budget fault
// scenario: gen [-skip NAME,...] [-disarmed] > hostile.yaml. -names lists
// the cases' names and kinds instead; -arm NAME prints the merge patch that
// arms a disarmed case.
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
	disarmed := flag.Bool("disarmed", false, "write each case disarmed: the same values under keys no template reads")
	arm := flag.String("arm", "", "print the JSON merge patch that arms the disarmed case `name`")
	flag.Parse()
	if *arm != "" {
		for _, c := range hostile.Cases() {
			if c.Name == *arm {
				os.Stdout.Write(c.ArmPatch())
				return
			}
		}
		fmt.Fprintf(os.Stderr, "no case %q\n", *arm)
		os.Exit(2)
	}
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
		if *disarmed {
			c = c.Disarmed()
		}
		os.Stdout.Write(c.Resource())
	}
	if !*names {
		os.Stdout.WriteString("\n")
	}
}
