package cleanup

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Flag switches fastpath-agent to cleanup mode: with --install-cni it removes
// the plugin's binaries, node configuration and state, otherwise the marked
// links and OVS bridges and the port security table; then it reports ready
// and waits to be stopped.
const Flag = "--cleanup"

// stateVolume is the volume SwitchDaemonSet adds for the init container's
// removal of the plugin's state directory, which the agent never mounts whole.
const stateVolume = "fastpath-cleanup-cni-state"

// SwitchDaemonSet turns the agent DaemonSet key into a node cleanup: it adds
// Flag to the arguments of each of its containers (the agent binary in both:
// the install-cni init container and the agent), gives the init container the
// plugin's state directory (the host path of its --cni-state-dir), lets every
// pod be replaced at once, and waits, polling every poll, until every
// scheduled pod runs that template and is ready, that is, has cleaned its
// node. The DaemonSet keeps the agent's node selection, mounts and
// capabilities, so the cleanup runs where the agent ran, as the agent did.
// Deleting it afterwards (helm uninstall, kubectl delete -k) leaves the nodes
// clean. A missing DaemonSet is not an error (nothing to clean with); a pod
// that cannot clean its node stays unready, and the wait ends with ctx.
func SwitchDaemonSet(ctx context.Context, c client.Client, key client.ObjectKey, poll time.Duration, log logr.Logger) error {
	ds := &appsv1.DaemonSet{}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, key, ds); err != nil {
			return err
		}
		if !switchTemplate(&ds.Spec) {
			return nil
		}
		return c.Update(ctx, ds)
	})
	if apierrors.IsNotFound(err) {
		log.Info("No agent DaemonSet: nothing to clean up with", "daemonSet", key)
		return nil
	}
	if err != nil {
		return fmt.Errorf("failed to switch DaemonSet %s to cleanup: %w", key, err)
	}
	log.Info("Switched the agent DaemonSet to cleanup; waiting for every node", "daemonSet", key)
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		if err := c.Get(ctx, key, ds); err != nil {
			return fmt.Errorf("failed to get DaemonSet %s: %w", key, err)
		}
		st := ds.Status
		if st.ObservedGeneration >= ds.Generation && st.UpdatedNumberScheduled == st.DesiredNumberScheduled &&
			st.NumberReady == st.DesiredNumberScheduled && st.NumberUnavailable == 0 {
			log.Info("Every node cleaned up", "daemonSet", key, "nodes", st.DesiredNumberScheduled)
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("failed to clean up the nodes of DaemonSet %s: %d of %d pods cleaned up and ready (kubectl logs -n %s -l app.kubernetes.io/component=agent): %w",
				key, min(st.UpdatedNumberScheduled, st.NumberReady), st.DesiredNumberScheduled, key.Namespace, ctx.Err())
		case <-t.C:
		}
	}
}

// switchTemplate edits spec for cleanup and reports whether it changed it.
func switchTemplate(spec *appsv1.DaemonSetSpec) bool {
	ps := &spec.Template.Spec
	changed := false
	for _, cs := range [][]corev1.Container{ps.InitContainers, ps.Containers} {
		for i := range cs {
			if !slices.Contains(cs[i].Args, Flag) {
				cs[i].Args = append(cs[i].Args, Flag)
				changed = true
			}
		}
	}
	for i := range ps.InitContainers {
		ic := &ps.InitContainers[i]
		dir := argValue(ic.Args, "--cni-state-dir")
		if dir == "" || slices.ContainsFunc(ic.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == stateVolume }) {
			continue
		}
		if !slices.ContainsFunc(ps.Volumes, func(v corev1.Volume) bool { return v.Name == stateVolume }) {
			t := corev1.HostPathDirectoryOrCreate
			ps.Volumes = append(ps.Volumes, corev1.Volume{Name: stateVolume, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: &t}}})
		}
		ic.VolumeMounts = append(ic.VolumeMounts, corev1.VolumeMount{Name: stateVolume, MountPath: dir})
		changed = true
	}
	all := intstr.FromString("100%")
	if spec.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType || spec.UpdateStrategy.RollingUpdate == nil ||
		spec.UpdateStrategy.RollingUpdate.MaxUnavailable == nil || *spec.UpdateStrategy.RollingUpdate.MaxUnavailable != all {
		spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: &all}}
		changed = true
	}
	return changed
}

// argValue returns the value of --name=value in args, or "".
func argValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}
