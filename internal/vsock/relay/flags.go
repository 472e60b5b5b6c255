package relay

import (
	"flag"
	"fmt"
)

// DefaultLimitFlags are the defaults of AddLimitFlags: the limits that do
// not follow from the memory limit at their defaults, the others 0 (from
// the memory limit, OptionsForMemory).
func DefaultLimitFlags() Options {
	return Options{
		MaxConnsPerCID:   DefaultMaxConnsPerCID,
		DefaultMaxConns:  DefaultMaxConns,
		IdleTimeout:      DefaultIdleTimeout,
		HalfCloseTimeout: DefaultHalfCloseTimeout,
	}
}

// AddLimitFlags binds the relay's limits in l to the --relay-* flags of fs
// (the node agent's and the vsock backend's, which runs the relay with
// --relay); each flag's default is l's value, so call it on
// DefaultLimitFlags. 0 in MaxTotalConns, MaxConnsPerNamespace and
// BufferBudget means "from --memory-limit" (OptionsForMemory).
func AddLimitFlags(fs *flag.FlagSet, l *Options) {
	fs.IntVar(&l.MaxTotalConns, "relay-max-conns", l.MaxTotalConns, fmt.Sprintf("vsock relay: connections over all routes (0: half of --memory-limit at %d KiB each, at most %d).", ConnMemoryEstimate>>10, DefaultMaxTotalConns))
	fs.IntVar(&l.MaxConnsPerNamespace, "relay-max-conns-per-namespace", l.MaxConnsPerNamespace, "vsock relay: the connections of one namespace's routes (0: a quarter of --relay-max-conns' derived value).")
	fs.Int64Var(&l.BufferBudget, "relay-buffer-budget", l.BufferBudget, fmt.Sprintf("vsock relay: bytes of %d KiB copy buffers lent to busy connections at once (0: a quarter of --memory-limit, or %d MiB when it is unknown).", DefaultBufferSize>>10, DefaultBufferBudget>>20))
	fs.IntVar(&l.MaxConnsPerCID, "relay-max-conns-per-cid", l.MaxConnsPerCID, "vsock relay: one source guest's connections over all routes.")
	fs.IntVar(&l.DefaultMaxConns, "relay-max-conns-per-route", l.DefaultMaxConns, "vsock relay: one route's connections.")
	fs.DurationVar(&l.IdleTimeout, "relay-idle-timeout", l.IdleTimeout, "vsock relay: close a connection without payload for this long (negative: never).")
	fs.DurationVar(&l.HalfCloseTimeout, "relay-half-close-timeout", l.HalfCloseTimeout, "vsock relay: close a connection this long after one direction ended (negative: never).")
}

// OptionsForMemory fills the limits left at 0 in flags (MaxTotalConns,
// MaxConnsPerNamespace, BufferBudget) from memoryLimit, the memory limit in
// bytes of the container the relay runs in (BudgetsForMemory; <= 0:
// unknown, the defaults); a limit set by flag stays.
func OptionsForMemory(flags Options, memoryLimit int64) Options {
	b := BudgetsForMemory(memoryLimit)
	if flags.MaxTotalConns == 0 {
		flags.MaxTotalConns = b.MaxTotalConns
	}
	if flags.MaxConnsPerNamespace == 0 {
		flags.MaxConnsPerNamespace = b.MaxConnsPerNamespace
	}
	if flags.BufferBudget == 0 {
		flags.BufferBudget = b.BufferBudget
	}
	return flags
}
