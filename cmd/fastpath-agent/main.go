package main

import (
	"flag"
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fastpath-io/fastpath/internal/datapath/ovsdb"
)

func main() {
	o := NewOptions()
	o.AddFlags(flag.CommandLine)
	zopts := zap.Options{}
	zopts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zopts)))
	if err := run(o); err != nil {
		ctrl.Log.Error(err, "Agent failed")
		os.Exit(1)
	}
}

// run cleans the node up (--cleanup), installs the CNI plugin and returns
// (--install-cni), or validates o,
// wires the node reconciler and its helpers (setup.go) and runs them until
// a signal stops the manager. What it starts is stopped in reverse order
// when it returns.
func run(o Options) error {
	cni, err := cniInstaller(o)
	if err != nil {
		return err
	}
	if o.Cleanup {
		return cleanNode(o)
	}
	if o.CNI.Install {
		return installCNI(cni, o.CNI.NodeConfig)
	}
	if err := o.Validate(); err != nil {
		return fmt.Errorf("failed to start: %w", err)
	}
	transport, emulatedRoot, err := o.Relay.transport()
	if err != nil {
		return err
	}
	mgr, err := newManager(o)
	if err != nil {
		return err
	}
	changes, wake := newWake(o.NodeName)
	rl, closeRelay, err := newRelay(mgr, o, transport, wake)
	if err != nil {
		return err
	}
	defer closeRelay()
	ovs := ovsdb.NewConn(o.Datapath.OVSSocket, ctrl.Log.WithName("ovsdb"))
	defer ovs.Close()
	r := newReconciler(o, ovs, rl, transport, cni)
	r.SiblingChanges = changes
	if o.DevicePlugins.Dir != "" {
		dp := newDevicePlugins(o.DevicePlugins.Dir)
		defer dp.Stop()
		r.DevicePlugins, r.MacvtapLaunchers = dp, newMacvtapLaunchers(mgr, o)
	}
	if o.Sibling.Enabled() {
		stop, err := newSiblings(mgr, o, r, wake)
		if err != nil {
			return err
		}
		defer stop()
		if err := offerSiblingDevices(mgr, o, r); err != nil {
			return err
		}
	}
	ctx := ctrl.SetupSignalHandler()
	if o.DHCP.Enabled {
		m := newDHCP(ctx, o)
		defer m.Stop()
		r.DHCP = m
	}
	if err := r.SetupWithManager(ctx, mgr, controller.Options{}); err != nil {
		return err
	}
	if err := addHealthChecks(mgr); err != nil {
		return err
	}
	if err := addHostCPU(mgr, o); err != nil {
		return err
	}
	logStart(o, r.AgentVersion, cni.Source, emulatedRoot)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("failed to run manager: %w", err)
	}
	return nil
}
