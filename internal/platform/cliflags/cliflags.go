// Package cliflags holds the flag parsing the project's command-line tools
// share (fastpath-bench, kubectl-fastpath).
package cliflags

import "flag"

// Parse parses args with fs wherever the flags stand among them, as kubectl
// allows ("report results.json -o dir"), and returns the positional arguments
// in order. Everything after a lone "--" is positional. The error is fs.Parse's:
// flag.ErrHelp for -h/--help, otherwise a bad flag or value.
func Parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if rest[0] == "--" {
			return append(pos, rest[1:]...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}
