package emulation

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// EmulatedNote is what the emulated kubelet puts in a pod's FASTPATH_EMULATED
// environment variable: what a benchmark run under the emulation measures.
const EmulatedNote = "VMs emulated as network namespaces (virt-launcher and guest, KubeVirt's masquerade and bridge bindings rebuilt with veths); vsock emulated over UNIX sockets; runner run by an emulated kubelet"

// jobRun is one runner Job the emulated kubelet executes.
type jobRun struct {
	key    types.NamespacedName
	cancel context.CancelFunc
}

func (e *Emulator) setupKubelet(mgr ctrl.Manager) error {
	err := ctrl.NewControllerManagedBy(mgr).
		Named("emulated-kubelet").
		For(&batchv1.Job{}).
		Complete(reconcile.Func(e.reconcileJob))
	if err != nil {
		return fmt.Errorf("failed to set up the emulated kubelet: %w", err)
	}
	return nil
}

func jobFinished(job *batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// reconcileJob starts a Job's pod once (the Job controller, scheduler and
// kubelet in one) and stops it when the Job is deleted.
func (e *Emulator) reconcileJob(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	job := &batchv1.Job{}
	if err := e.cli.Get(ctx, req.NamespacedName, job); err != nil {
		if apierrors.IsNotFound(err) {
			e.stopJobs(req.NamespacedName)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	if job.DeletionTimestamp != nil {
		e.stopJobs(req.NamespacedName)
		return reconcile.Result{}, nil
	}
	if jobFinished(job) || job.Status.StartTime != nil {
		// Finished, or started by an earlier emulation (not resumed).
		return reconcile.Result{}, nil
	}
	e.mu.Lock()
	if e.stopped || e.jobs[job.UID] != nil {
		e.mu.Unlock()
		return reconcile.Result{}, nil
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	e.jobs[job.UID] = &jobRun{key: req.NamespacedName, cancel: cancel}
	e.jobsWG.Add(1)
	e.mu.Unlock()
	go func() {
		defer e.jobsWG.Done()
		defer cancel()
		e.runJob(runCtx, job.DeepCopy())
	}()
	return reconcile.Result{}, nil
}

// stopJobs kills the pods of Jobs named key (a deleted Job).
func (e *Emulator) stopJobs(key types.NamespacedName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, r := range e.jobs {
		if r.key == key {
			r.cancel()
		}
	}
}

// runJob runs the Job's single container as a local process and writes the
// Job status (start, then Complete or Failed) as the Job controller would.
func (e *Emulator) runJob(ctx context.Context, job *batchv1.Job) {
	key := types.NamespacedName{Namespace: job.Namespace, Name: job.Name}
	start := metav1.Now()
	if err := e.patchJobStatus(ctx, job, func(s *batchv1.JobStatus) {
		s.StartTime = &start
		s.Active = 1
	}); err != nil {
		e.log.printf("kubelet", "Job %s: %v", key, err)
		return
	}
	if job.Spec.ActiveDeadlineSeconds != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(*job.Spec.ActiveDeadlineSeconds)*time.Second)
		defer cancel()
	}
	out, runErr := e.execJobPod(ctx, job)
	end := metav1.Now()
	if ctx.Err() != nil && !e.jobDeadlineHit(ctx) {
		// The failure is still recorded below if the Job exists, so nobody waits for it.
		e.log.printf("kubelet", "Job %s: pod killed (the Job was deleted or the emulation stops)", key)
	}
	err := e.patchJobStatus(context.Background(), job, func(s *batchv1.JobStatus) {
		s.Active = 0
		now := end
		if runErr == nil {
			s.Succeeded = 1
			s.CompletionTime = &now
			s.Conditions = append(s.Conditions,
				batchv1.JobCondition{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now, Reason: batchv1.JobReasonCompletionsReached, Message: "Reached expected number of succeeded pods"},
				batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now, Reason: batchv1.JobReasonCompletionsReached, Message: "Reached expected number of succeeded pods"})
			return
		}
		reason, msg := batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit"
		if e.jobDeadlineHit(ctx) {
			reason, msg = batchv1.JobReasonDeadlineExceeded, "Job was active longer than specified deadline"
		}
		s.Failed = 1
		s.Conditions = append(s.Conditions,
			batchv1.JobCondition{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now, Reason: reason, Message: msg},
			batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now, Reason: reason, Message: msg})
	})
	if err != nil && !apierrors.IsNotFound(err) {
		e.log.printf("kubelet", "Job %s: %v", key, err)
	}
	if runErr != nil {
		e.log.printf("kubelet", "Job %s failed after %s: %v%s", key, end.Sub(start.Time).Round(time.Second), runErr, tail(out, 5))
		return
	}
	e.log.printf("kubelet", "Job %s succeeded after %s", key, end.Sub(start.Time).Round(time.Second))
}

func (e *Emulator) jobDeadlineHit(ctx context.Context) bool {
	return errors.Is(ctx.Err(), context.DeadlineExceeded)
}

func (e *Emulator) patchJobStatus(ctx context.Context, job *batchv1.Job, mutate func(*batchv1.JobStatus)) error {
	cur := &batchv1.Job{}
	if err := e.reader.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: job.Name}, cur); err != nil {
		return fmt.Errorf("failed to get Job %s/%s: %w", job.Namespace, job.Name, err)
	}
	if cur.UID != job.UID {
		return apierrors.NewNotFound(batchv1.Resource("jobs"), job.Name)
	}
	patch := client.MergeFrom(cur.DeepCopy())
	mutate(&cur.Status)
	if err := e.cli.Status().Patch(ctx, cur, patch); err != nil {
		return fmt.Errorf("failed to write the status of Job %s/%s: %w", job.Namespace, job.Name, err)
	}
	return nil
}

// execJobPod prepares and runs the pod of a Job: its volumes (Secrets,
// ConfigMaps, emptyDirs) materialised under the pod directory with the mount
// paths in the arguments rewritten to them, a kubeconfig holding a token of
// the pod's ServiceAccount (TokenRequest, as the kubelet projects one), the
// emulated ssh first on PATH, and the container command resolved through
// Options.Binaries. The process runs on the host (host network namespace, so
// it reaches the API server), in its own process group, and is killed with
// it when ctx ends. It returns the combined output.
func (e *Emulator) execJobPod(ctx context.Context, job *batchv1.Job) ([]byte, error) {
	spec := job.Spec.Template.Spec
	if len(spec.Containers) != 1 || len(spec.InitContainers) > 0 {
		return nil, fmt.Errorf("failed to run Job %s/%s: only pods with exactly one container are emulated", job.Namespace, job.Name)
	}
	c := spec.Containers[0]
	if len(c.Command) == 0 {
		return nil, fmt.Errorf("failed to run Job %s/%s: container %s has no command (image entrypoints are not emulated)", job.Namespace, job.Name, c.Name)
	}
	bin, ok := e.opts.Binaries[filepath.Base(c.Command[0])]
	if !ok {
		return nil, fmt.Errorf("failed to run Job %s/%s: no local stand-in for command %q of image %s", job.Namespace, job.Name, c.Command[0], c.Image)
	}
	dir := filepath.Join(e.opts.StateDir, "pods", job.Namespace, job.Name+"-"+string(job.UID)[:8])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("failed to create pod directory %s: %w", dir, err)
	}
	mounts, err := e.materializeVolumes(ctx, job.Namespace, spec, c, dir)
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	sa := spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	if err := e.writeServiceAccountKubeconfig(ctx, job.Namespace, sa, kubeconfig); err != nil {
		return nil, err
	}
	rewrite := func(s string) string {
		for _, m := range mounts {
			s = strings.ReplaceAll(s, m[0], m[1])
		}
		return s
	}
	argv := append([]string{bin}, c.Command[1:]...)
	argv = append(argv, c.Args...)
	for i := range argv {
		argv[i] = rewrite(argv[i])
	}
	env := []string{
		"PATH=" + e.SSHShimDir() + ":" + os.Getenv("PATH"),
		"HOME=" + dir,
		"KUBECONFIG=" + kubeconfig,
		"POD_NAMESPACE=" + job.Namespace,
		// Says, to a runner that records it, what the results were measured on.
		"FASTPATH_EMULATED=" + EmulatedNote,
	}
	for _, v := range c.Env {
		switch {
		case v.ValueFrom == nil:
			env = append(env, v.Name+"="+rewrite(v.Value))
		case v.ValueFrom.FieldRef != nil && v.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			env = append(env, v.Name+"="+job.Namespace)
		case v.ValueFrom.FieldRef != nil && v.ValueFrom.FieldRef.FieldPath == "spec.nodeName":
			env = append(env, v.Name+"="+e.opts.NodeName)
		default:
			return nil, fmt.Errorf("failed to run Job %s/%s: env %s uses a valueFrom the emulation does not support", job.Namespace, job.Name, v.Name)
		}
	}
	logPath := filepath.Join(dir, c.Name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("failed to create %s: %w", logPath, err)
	}
	defer logFile.Close()
	var buf lockedBuffer
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = env, dir
	cmd.Stdout = &teeWriter{a: logFile, b: &buf}
	cmd.Stderr = cmd.Stdout
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	e.log.printf("kubelet", "Job %s/%s: pod runs %s (image %s stood in by the local binary; ssh is the emulated one in %s; log %s)",
		job.Namespace, job.Name, strings.Join(argv, " "), c.Image, e.SSHShimDir(), logPath)
	err = cmd.Run()
	if err != nil {
		return buf.Bytes(), fmt.Errorf("failed to run %s: %w", filepath.Base(argv[0]), err)
	}
	return buf.Bytes(), nil
}

// materializeVolumes writes the pod's Secret and ConfigMap volumes under
// dir/volumes/<name> (honouring items and defaultMode) and creates emptyDirs,
// and returns (mount path, host path) pairs of the container's mounts,
// longest mount path first.
func (e *Emulator) materializeVolumes(ctx context.Context, namespace string, spec corev1.PodSpec, c corev1.Container, dir string) ([][2]string, error) {
	vols := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		vols[v.Name] = v
	}
	var mounts [][2]string
	for _, m := range c.VolumeMounts {
		v, ok := vols[m.Name]
		if !ok {
			return nil, fmt.Errorf("failed to mount volume %s: the pod has no such volume", m.Name)
		}
		host := filepath.Join(dir, "volumes", v.Name)
		if err := os.MkdirAll(host, 0o755); err != nil {
			return nil, fmt.Errorf("failed to create %s: %w", host, err)
		}
		var (
			data  map[string][]byte
			items []corev1.KeyToPath
			mode  *int32
		)
		switch {
		case v.Secret != nil:
			sec := &corev1.Secret{}
			if err := e.reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: v.Secret.SecretName}, sec); err != nil {
				return nil, fmt.Errorf("failed to mount Secret %s as volume %s: %w", v.Secret.SecretName, v.Name, err)
			}
			data, items, mode = sec.Data, v.Secret.Items, v.Secret.DefaultMode
		case v.ConfigMap != nil:
			cm := &corev1.ConfigMap{}
			if err := e.reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: v.ConfigMap.Name}, cm); err != nil {
				return nil, fmt.Errorf("failed to mount ConfigMap %s as volume %s: %w", v.ConfigMap.Name, v.Name, err)
			}
			data = map[string][]byte{}
			for k, s := range cm.Data {
				data[k] = []byte(s)
			}
			items, mode = v.ConfigMap.Items, v.ConfigMap.DefaultMode
		case v.EmptyDir != nil:
		default:
			return nil, fmt.Errorf("failed to mount volume %s: only Secret, ConfigMap and emptyDir volumes are emulated", v.Name)
		}
		if err := writeVolume(host, data, items, mode); err != nil {
			return nil, fmt.Errorf("failed to mount volume %s: %w", v.Name, err)
		}
		mounts = append(mounts, [2]string{m.MountPath, host})
	}
	sort.Slice(mounts, func(i, j int) bool { return len(mounts[i][0]) > len(mounts[j][0]) })
	return mounts, nil
}

func writeVolume(dir string, data map[string][]byte, items []corev1.KeyToPath, mode *int32) error {
	perm := os.FileMode(0o644)
	if mode != nil {
		perm = os.FileMode(*mode)
	}
	if len(items) == 0 {
		for k := range data {
			items = append(items, corev1.KeyToPath{Key: k, Path: k})
		}
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			return fmt.Errorf("key %s is missing", it.Key)
		}
		p := filepath.Join(dir, filepath.Clean("/"+it.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		fm := perm
		if it.Mode != nil {
			fm = os.FileMode(*it.Mode)
		}
		if err := os.WriteFile(p, v, fm); err != nil {
			return err
		}
		if err := os.Chmod(p, fm); err != nil {
			return err
		}
	}
	return nil
}

// writeServiceAccountKubeconfig mints a token of the ServiceAccount with the
// TokenRequest API (as the kubelet does for a projected token) and writes a
// kubeconfig for it, so the pod acts with exactly the ServiceAccount's RBAC.
func (e *Emulator) writeServiceAccountKubeconfig(ctx context.Context, namespace, sa, path string) error {
	acct := &corev1.ServiceAccount{}
	if err := e.reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: sa}, acct); err != nil {
		return fmt.Errorf("failed to get ServiceAccount %s/%s of the pod: %w", namespace, sa, err)
	}
	exp := int64(3600)
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}
	if err := e.cli.SubResource("token").Create(ctx, acct, tr); err != nil {
		return fmt.Errorf("failed to request a token for ServiceAccount %s/%s: %w", namespace, sa, err)
	}
	cfg := clientcmdapi.NewConfig()
	cluster := clientcmdapi.NewCluster()
	cluster.Server = e.opts.Config.Host
	cluster.CertificateAuthorityData = e.opts.Config.CAData
	cluster.CertificateAuthority = e.opts.Config.CAFile
	cfg.Clusters["emulated"] = cluster
	user := clientcmdapi.NewAuthInfo()
	user.Token = tr.Status.Token
	cfg.AuthInfos[namespace+"/"+sa] = user
	kctx := clientcmdapi.NewContext()
	kctx.Cluster, kctx.AuthInfo, kctx.Namespace = "emulated", namespace+"/"+sa, namespace
	cfg.Contexts["pod"] = kctx
	cfg.CurrentContext = "pod"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("failed to write kubeconfig %s: %w", path, err)
	}
	return os.Chmod(path, 0o600)
}

// tail returns the last n lines of out, each on its own indented line.
func tail(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	if len(lines) == 1 && lines[0] == "" {
		return ""
	}
	return "\n    | " + strings.Join(lines, "\n    | ")
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]byte(nil), b.buf.Bytes()...)
}

type teeWriter struct {
	mu   sync.Mutex
	a, b interface{ Write([]byte) (int, error) }
}

func (t *teeWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, err := t.a.Write(p); err != nil {
		return 0, err
	}
	return t.b.Write(p)
}
