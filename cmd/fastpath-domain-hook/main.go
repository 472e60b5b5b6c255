package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-logr/stdr"

	"github.com/fastpath-io/fastpath/internal/vm/domainhook"
)

func main() {
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}

// run is the program: argv[0] names the hook point the sidecar-shim calls.
// It returns 0 on success, 1 when the hook failed and 2 for a usage error.
func run(argv []string, stdout, stderr io.Writer) int {
	name := filepath.Base(argv[0])
	args := argv[1:]
	logger := stdr.New(log.New(stderr, name+": ", 0))

	switch {
	case name == domainhook.HookName:
	case len(args) > 0 && args[0] == domainhook.HookName:
		args = args[1:]
	case name == "preCloudInitIso":
		logger.Error(errors.New("unsupported hook point"), "Only onDefineDomain is implemented; do not install this binary as preCloudInitIso")
		return 1
	}

	flags := flag.NewFlagSet(name, flag.ContinueOnError)
	flags.SetOutput(stderr)
	vmi := flags.String("vmi", "", "the VirtualMachineInstance as JSON (sidecar-shim --vmi)")
	domain := flags.String("domain", "", "the libvirt domain XML to tune (sidecar-shim --domain)")
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if flags.NArg() > 0 || *vmi == "" || *domain == "" {
		fmt.Fprintf(stderr, "usage: %s --vmi <VMI JSON> --domain <domain XML>\n", name)
		return 2
	}

	res, err := domainhook.OnDefineDomain([]byte(*vmi), []byte(*domain))
	if err != nil {
		logger.Error(err, "Failed to tune the domain; no domain XML printed")
		return 1
	}
	for _, w := range res.Warnings {
		logger.Info("Warning: " + w)
	}
	var networks []string
	set := map[string][]string{}
	for _, c := range res.Changes {
		if _, seen := set[c.Network]; !seen {
			networks = append(networks, c.Network)
		}
		item := c.Element + "." + c.Attr + "=" + c.To
		if c.From != "" {
			item += " (was " + c.From + ")"
		}
		set[c.Network] = append(set[c.Network], item)
	}
	for _, n := range networks {
		logger.Info("Tuned domain interface", "alias", domainhook.AliasPrefix+n, "set", strings.Join(set[n], ", "))
	}
	if !res.Changed() {
		logger.Info("Domain unchanged")
	}
	if _, err := stdout.Write(res.Domain); err != nil {
		logger.Error(err, "Failed to write the domain XML")
		return 1
	}
	return 0
}
