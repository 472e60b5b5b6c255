package ovsdb

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	libovsdb "github.com/ovn-org/libovsdb/ovsdb"

	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

func TestDialErrors(t *testing.T) {
	for _, tc := range []struct {
		name        string
		unreachable error
		wantPrefix  string
	}{
		{name: "plain", wantPrefix: "failed to connect to OVSDB at %s: "},
		{name: "wraps Unreachable", unreachable: ErrUnreachable, wantPrefix: "failed to connect to OVSDB at %s: OVSDB unreachable: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			endpoint := "unix:" + t.TempDir() + "/db.sock"
			b := &Bridge{}
			_, err := dial(ctx, endpoint, dialOptions{Log: testr.New(t), Unreachable: tc.unreachable,
				Tables: []client.MonitorOption{client.WithTable(b, &b.Name)}})
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(HavePrefix(tc.wantPrefix, endpoint))
			g.Expect(errors.Is(err, ErrUnreachable)).To(Equal(tc.unreachable != nil))
		})
	}
}

func TestConnectWrapsUnreachable(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := Connect(ctx, "unix:"+t.TempDir()+"/db.sock", testr.New(t))
	g.Expect(err).To(MatchError(ErrUnreachable))
	g.Expect(err).To(MatchError(ContainSubstring("failed to connect to OVSDB at unix:")))
}

// TestSharedHelpersAgainstOVS checks dial, the lookup functions and transact
// against a real ovsdb-server, monitoring fewer columns than Connect does.
func TestSharedHelpersAgainstOVS(t *testing.T) {
	testutil.RequireRoot(t)
	// Start waits for other test binaries that use OVS; ctx starts after it.
	socket, name := testutil.StartOVS(t), testutil.UniqueName("fpdb")
	testutil.AddOVSBridge(t, socket, name, 1600)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g := NewWithT(t)

	o, b, p, i := &OpenvSwitch{}, &Bridge{}, &Port{}, &Interface{}
	c, err := dial(ctx, socket, dialOptions{Log: testr.New(t), Tables: []client.MonitorOption{
		client.WithTable(o, &o.Bridges, &o.OtherConfig),
		client.WithTable(b, &b.Name, &b.Ports, &b.DatapathType),
		client.WithTable(p, &p.Name, &p.Interfaces, &p.ExternalIDs),
		client.WithTable(i, &i.Name, &i.Type, &i.MTU, &i.Ofport, &i.ExternalIDs),
	}})
	g.Expect(err).NotTo(HaveOccurred())
	defer c.Close()

	br, err := lookupBridge(ctx, c, name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(br).NotTo(BeNil())
	g.Expect(br.DatapathType).To(Equal(DatapathNetdev))
	g.Expect(br.Ports).To(HaveLen(1))
	port, err := lookupPort(ctx, c, name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(port).NotTo(BeNil())
	g.Expect(br.Ports).To(ConsistOf(port.UUID))
	iface, err := lookupInterface(ctx, c, name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(iface.Type).To(Equal(InterfaceTypeInternal))
	g.Expect(iface.MTU).To(HaveValue(Equal(1600)))
	g.Expect(iface.MTURequest).To(BeNil(), "mtu_request is not monitored")

	missing := name + "x"
	for _, lookup := range []func() (any, error){
		func() (any, error) { return lookupBridge(ctx, c, missing) },
		func() (any, error) { return lookupPort(ctx, c, missing) },
		func() (any, error) { return lookupInterface(ctx, c, missing) },
	} {
		row, err := lookup()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(row).To(BeNil())
	}

	// transact returns one result per operation and names what failed.
	ids := map[string]string{"fastpath.io/test": "1"}
	ops, err := c.Where(port).Mutate(port, model.Mutation{Field: &port.ExternalIDs, Mutator: libovsdb.MutateOperationInsert, Value: ids})
	g.Expect(err).NotTo(HaveOccurred())
	res, err := transact(ctx, c, "mark port "+name, ops)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res).To(HaveLen(1))
	g.Expect(res[0].Count).To(Equal(1))
	g.Eventually(func() (map[string]string, error) {
		p, err := lookupPort(ctx, c, name)
		if p == nil {
			return nil, err
		}
		return p.ExternalIDs, err
	}).Should(Equal(ids))

	// A port needs at least one interface (vswitch.ovsschema): OVSDB
	// refuses the mutation and the transaction.
	ops, err = c.Where(port).Mutate(port, model.Mutation{Field: &port.Interfaces, Mutator: libovsdb.MutateOperationDelete, Value: port.Interfaces})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = transact(ctx, c, "empty port "+name, ops)
	g.Expect(err).To(MatchError(HavePrefix("failed to empty port " + name + ": ")))
	port, err = lookupPort(ctx, c, name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(port.Interfaces).To(HaveLen(1))
}
