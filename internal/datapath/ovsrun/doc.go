// Package ovsrun starts Open vSwitch on this machine for programs and tests
// that need a real ovsdb-server and ovs-vswitchd: the OVS-using tests (through
// internal/testing/testutil.StartOVS) and the local node benchmark
// (bench/localbench).
//
// Start takes a machine-wide flock(2) on LockPath, so that at most one of
// them uses, starts or stops OVS at a time; starts Debian's
// openvswitch-switch with its ovs-ctl script when the OVSDB socket does not
// answer, with other_config:userspace-tso-enable=true set before ovs-vswitchd
// starts (cni/README.md: without it TCP from veths with TX checksum offload,
// TSO or GRO stalls on a netdev bridge); and Session.Stop stops only what
// Start started, then releases the lock.
package ovsrun
