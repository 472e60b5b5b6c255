package images

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// The Dockerfile is the one recipe of the images (dockerfile.go): these tests
// check what the builder reads from it, and that a Dockerfile it cannot follow
// is an error that says so rather than an image that silently differs.

func readDockerfile(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "Dockerfile"))
	if err != nil {
		t.Fatalf("read Dockerfile: %v", err)
	}
	return string(b)
}

// What the images are, read from the Dockerfile: the facts the chart, the
// agent and the docs rely on.
func TestTargetsFollowTheDockerfile(t *testing.T) {
	g := NewWithT(t)
	ts, err := Targets(filepath.Join("..", "..", ".."))
	g.Expect(err).NotTo(HaveOccurred())
	byName := map[string]Target{}
	var names []string
	for _, tg := range ts {
		byName[tg.Name] = tg
		names = append(names, tg.Name)
	}
	g.Expect(names).To(Equal([]string{"pause", "operator", "agent", "bench", "domain-hook", "vsock-backend"}))
	paths := func(tg Target) (out []string) {
		for _, b := range tg.Binaries {
			out = append(out, b.Name+"="+b.Package+b.Crate+"@"+b.Path)
		}
		return out
	}
	g.Expect(paths(byName["operator"])).To(Equal([]string{"fastpath-operator=./cmd/fastpath-operator@/usr/local/bin/fastpath-operator"}))
	g.Expect(byName["operator"].Base.Name).To(Equal(baseStaticNonroot.Name))
	g.Expect(byName["operator"].ConfigUser()).To(Equal("65532:65532"))
	g.Expect(paths(byName["agent"])).To(Equal([]string{
		"fastpath-agent=./cmd/fastpath-agent@/usr/local/bin/fastpath-agent",
		"fastpath=./cni/cmd/fastpath@/usr/local/bin/fastpath",
		"fastpath-ovs-plugin=./cni/cmd/fastpath-ovs-plugin@/usr/local/bin/fastpath-ovs-plugin",
		"vhost-device-vsock=vhost-device-vsock@/usr/local/bin/vhost-device-vsock",
	}))
	vhost := byName["agent"].Binaries[3]
	g.Expect(vhost.Version).To(Equal(VhostDeviceVsockVersion))
	g.Expect(vhost.Prebuilt).To(Equal("bin/vhost-device-vsock"))
	g.Expect(vhost.SourceStage()).To(Equal("vhost-device-vsock"))
	g.Expect(byName["agent"].Base.Name).To(Equal(baseCC.Name))
	g.Expect(byName["bench"].Base.Debs).To(Equal([]string{"netperf", "openssh-client", "ca-certificates"}))
	g.Expect(byName["bench"].User).To(Equal("65532:65532"))
	g.Expect(byName["domain-hook"].Entrypoint).To(Equal([]string{SidecarShimPath, "--version", "v1alpha3"}))
	g.Expect(paths(byName["domain-hook"])).To(Equal([]string{"fastpath-domain-hook=./cmd/fastpath-domain-hook@/usr/bin/onDefineDomain"}))
	// The backend's image: its server and the same vhost-device-vsock; no USER,
	// the chart gives the server 65532 and its init container root.
	g.Expect(paths(byName["vsock-backend"])).To(Equal([]string{
		"fastpath-vsock-backend=./cmd/fastpath-vsock-backend@/usr/local/bin/fastpath-vsock-backend",
		"vhost-device-vsock=vhost-device-vsock@/usr/local/bin/vhost-device-vsock",
	}))
	g.Expect(byName["vsock-backend"].Base.Name).To(Equal(baseCC.Name))
	g.Expect(byName["vsock-backend"].Entrypoint).To(Equal([]string{"/usr/local/bin/fastpath-vsock-backend"}))
}

// hack/setup.sh builds the vhost-device-vsock the builder puts in the agent
// image: the version it pins is the Dockerfile's.
func TestSetupBuildsTheVhostDeviceVsockOfTheImages(t *testing.T) {
	g := NewWithT(t)
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "hack", "setup.sh"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).To(ContainSubstring("\nVHOST_VSOCK_VERSION=" + VhostDeviceVsockVersion + "\n"))
	g.Expect(string(b)).To(ContainSubstring(`bash "${ROOT}/hack/vhost-device-vsock/source.sh" "${VHOST_VSOCK_VERSION}" "${ROOT}/_out/vhost-device-vsock/src"`))
	g.Expect(string(b)).To(ContainSubstring(`cargo install --quiet --force --locked --path "${ROOT}/_out/vhost-device-vsock/src"`))
}

// A Dockerfile the builder cannot follow is an error naming the stage and
// what it cannot follow.
func TestDockerfileTheBuilderCannotFollowIsAnError(t *testing.T) {
	df := readDockerfile(t)
	cargo := "stage agent: stage vhost-device-vsock does not run bash /src/hack/<crate>/source.sh <version> /src/<crate> and cargo install --locked --path /src/<crate> into /out/vhost-device-vsock"
	for _, tc := range []struct {
		name   string
		editDF func(string) string
		want   string
		also   []string // further errors the same edit makes
	}{
		{name: "a stage nothing copies from", editDF: func(s string) string {
			return strings.ReplaceAll(s, "COPY --from=vhost-device-vsock /out/vhost-device-vsock /usr/local/bin/vhost-device-vsock\n", "")
		}, want: "stage vhost-device-vsock: neither an image (no ENTRYPOINT) nor copied from"},
		{name: "cargo without --locked", editDF: func(s string) string { return strings.Replace(s, "cargo install --locked ", "cargo install ", 1) },
			want: cargo},
		{name: "a crate not fetched by its source.sh", editDF: func(s string) string {
			return strings.Replace(s, "bash /src/hack/vhost-device-vsock/source.sh", "bash /src/hack/other/source.sh", 1)
		}, want: cargo},
		{name: "a base without a stand-in", editDF: func(s string) string {
			return strings.Replace(s, "FROM ${CC_IMAGE} AS agent", "FROM ${STATIC_IMAGE} AS agent", 1)
		}, want: "stage agent: FROM ${STATIC_IMAGE}: the builder has a stand-in only for FROM ${<ARG>} with ARG one of"},
		{name: "a base image the stand-in is not", editDF: func(s string) string {
			return strings.Replace(s, "ARG CC_IMAGE=gcr.io/distroless/cc-debian12", "ARG CC_IMAGE=gcr.io/distroless/static-debian12", 1)
		}, want: "stage agent: ARG CC_IMAGE=gcr.io/distroless/static-debian12, but the builder's cc base stands in for gcr.io/distroless/cc-debian12"},
		{name: "a base ARG dropped", editDF: func(s string) string {
			return strings.Replace(s, "ARG CC_IMAGE=gcr.io/distroless/cc-debian12\n", "", 1)
		}, want: "stage agent: no ARG CC_IMAGE (its base)"},
		{name: "a copy of no binary", editDF: func(s string) string {
			return strings.Replace(s, "COPY --from=build /out/fastpath-domain-hook /usr/bin/onDefineDomain", "COPY --from=build /src/go.mod /go.mod", 1)
		}, want: "stage domain-hook: COPY --from=build /src/go.mod: the builder copies only /out/<binary>"},
		{name: "build flags", editDF: func(s string) string { return strings.ReplaceAll(s, "-trimpath ", "") },
			want: "stage build: no -trimpath (the builder's buildGo uses it)"},
		{name: "a binary not built", editDF: func(s string) string {
			return strings.Replace(s, "    CGO_ENABLED=0 go build -trimpath -ldflags \"-s -w\" -o /out/fastpath-bench ./bench/cmd/fastpath-bench; \\\n", "", 1)
		}, want: "stage bench: the build stage does not build /out/fastpath-bench"},
		{name: "nonroot user", editDF: func(s string) string { return strings.Replace(s, "useradd --uid 65532", "true", 1) },
			want: "stage bench: USER 65532:65532 on a base without that user and no useradd --uid 65532"},
		{name: "an instruction the builder does not read", editDF: func(s string) string {
			return strings.Replace(s, "USER 65532:65532\nENTRYPOINT [\"/usr/local/bin/fastpath-operator\"]", "USER 65532:65532\nEXPOSE 8080\nENTRYPOINT [\"/usr/local/bin/fastpath-operator\"]", 1)
		}, want: "stage operator: EXPOSE is not an instruction the daemonless build reads"},
		{name: "the Go stage on the builder's platform without cross-compiling", editDF: func(s string) string {
			return strings.Replace(s, "export GOOS=${TARGETOS} GOARCH=${TARGETARCH}; ", "", 1)
		}, want: "stage build: FROM --platform=$BUILDPLATFORM without GOOS=${TARGETOS} GOARCH=${TARGETARCH}"},
		{name: "an image stage on the builder's platform", editDF: func(s string) string {
			return strings.Replace(s, "FROM ${RUST_IMAGE} AS vhost-device-vsock", "FROM --platform=$BUILDPLATFORM ${RUST_IMAGE} AS vhost-device-vsock", 1)
		}, want: "stage vhost-device-vsock: FROM --platform=$BUILDPLATFORM: only the Go stage build may run on another platform"},
		{name: "KubeVirt version", editDF: func(s string) string {
			return strings.Replace(s, "KUBEVIRT_VERSION="+KubeVirtVersion, "KUBEVIRT_VERSION=v1.5.0", 1)
		}, want: "ARG KUBEVIRT_VERSION=v1.5.0, but the builder builds KubeVirt's sidecar-shim " + KubeVirtVersion,
			also: []string{"stage domain-hook: ARG SIDECAR_SHIM_IMAGE=quay.io/kubevirt/sidecar-shim:v1.5.0, but the builder's sidecar-shim base stands in for " + baseSidecarShim.Image}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			text := tc.editDF(df)
			g.Expect(text).NotTo(Equal(df), "the edit changed nothing")
			_, err := TargetsFromDockerfile(text)
			g.Expect(err).To(HaveOccurred())
			for _, w := range append([]string{tc.want}, tc.also...) {
				g.Expect(err.Error()).To(ContainSubstring(w))
			}
		})
	}
}

// makeDockerBuild runs `make docker-build` at the repository root with PATH
// only dir (and what make's recipe needs) and returns its output.
func makeDockerBuild(t *testing.T, dir string) string {
	t.Helper()
	g := NewWithT(t)
	for _, tool := range []string{"bash", "sh", "env", "awk"} {
		p, err := exec.LookPath(tool)
		g.Expect(err).NotTo(HaveOccurred())
		if _, err := os.Lstat(filepath.Join(dir, tool)); err != nil {
			g.Expect(os.Symlink(p, filepath.Join(dir, tool))).To(Succeed())
		}
	}
	makeBin, err := exec.LookPath("make")
	g.Expect(err).NotTo(HaveOccurred())
	cmd := exec.Command(makeBin, "-s", "-C", filepath.Join("..", "..", ".."), "docker-build", "REGISTRY=reg.example/fp", "TAG=v1")
	cmd.Env = []string{"PATH=" + dir, "HOME=" + t.TempDir()}
	out, err := cmd.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	return string(out)
}

// make docker-build builds every image target of the Dockerfile under the
// chart's names where a Docker engine answers, and says it skipped them,
// successfully, where none does or there is no docker at all.
func TestMakeDockerBuildBuildsEveryDockerfileImage(t *testing.T) {
	g := NewWithT(t)
	ts, err := TargetsFromDockerfile(readDockerfile(t))
	g.Expect(err).NotTo(HaveOccurred())
	var want []string
	for _, tg := range ts {
		want = append(want, "docker build --target "+tg.Stage+" -t reg.example/fp/fastpath-"+tg.Stage+":v1 .")
	}
	g.Expect(want).To(HaveLen(5))

	dir := t.TempDir()
	log := filepath.Join(dir, "docker.log")
	fake := "#!/bin/sh\necho \"docker $*\" >>" + log + "\n[ \"$1\" != info ] || [ ! -e " + filepath.Join(dir, "no-engine") + " ]\n"
	g.Expect(os.WriteFile(filepath.Join(dir, "docker"), []byte(fake), 0o755)).To(Succeed())
	makeDockerBuild(t, dir)
	b, err := os.ReadFile(log)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strings.Split(strings.TrimSpace(string(b)), "\n")).To(Equal(append([]string{"docker info"}, want...)))

	g.Expect(os.WriteFile(filepath.Join(dir, "no-engine"), nil, 0o644)).To(Succeed())
	g.Expect(makeDockerBuild(t, dir)).To(ContainSubstring("docker-build: SKIPPED: docker cannot reach a Docker engine"))

	g.Expect(os.Remove(filepath.Join(dir, "docker"))).To(Succeed())
	g.Expect(makeDockerBuild(t, dir)).To(ContainSubstring("docker-build: SKIPPED: no docker command on PATH"))
}
