package images

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// The Dockerfile is the recipe for registries elsewhere; Targets is the
// recipe `make images` follows here. These tests fail when one changes what
// an image puts where (binaries and their paths, USER, ENTRYPOINT, base,
// Debian packages, build flags) and the other does not.

// stage is what the drift check reads of one Dockerfile stage.
type stage struct {
	name, from string
	copies     [][3]string // COPY --from=<stage> <src> <dst>
	user       string
	entrypoint []string
	runs       []string
}

// parseDockerfile reads the instructions this repository's Dockerfile uses:
// line continuations, comments, ARG, FROM ... AS, COPY, USER, ENTRYPOINT (exec
// form only) and RUN.
func parseDockerfile(text string) (args map[string]string, stages []*stage, err error) {
	args = map[string]string{}
	var lines []string
	cur := ""
	for _, l := range strings.Split(text, "\n") {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "#") || (t == "" && cur == "") {
			continue
		}
		if strings.HasSuffix(t, "\\") {
			cur += strings.TrimSuffix(t, "\\") + " "
			continue
		}
		lines = append(lines, cur+t)
		cur = ""
	}
	var st *stage
	for _, l := range lines {
		instr, rest, _ := strings.Cut(l, " ")
		rest = strings.TrimSpace(rest)
		f := strings.Fields(rest)
		switch strings.ToUpper(instr) {
		case "ARG":
			k, v, _ := strings.Cut(rest, "=")
			if st == nil {
				args[k] = v
			}
		case "FROM":
			if len(f) != 3 || !strings.EqualFold(f[1], "AS") {
				return nil, nil, fmt.Errorf("FROM %q: want FROM <image> AS <name>", rest)
			}
			st = &stage{name: f[2], from: f[0]}
			stages = append(stages, st)
		case "COPY":
			if from, ok := strings.CutPrefix(f[0], "--from="); ok {
				if len(f) != 3 {
					return nil, nil, fmt.Errorf("COPY %q: want COPY --from=<stage> <src> <dst>", rest)
				}
				st.copies = append(st.copies, [3]string{from, f[1], f[2]})
			}
		case "USER":
			st.user = rest
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(rest), &st.entrypoint); err != nil {
				return nil, nil, fmt.Errorf("ENTRYPOINT %q: want the exec form: %w", rest, err)
			}
		case "RUN":
			st.runs = append(st.runs, rest)
		}
	}
	return args, stages, nil
}

// aptInstalled returns the packages of an `apt-get install` in run.
func aptInstalled(run string) []string {
	_, after, ok := strings.Cut(run, "apt-get install")
	if !ok {
		return nil
	}
	var pkgs []string
	for _, w := range strings.Fields(after) {
		if w == "&&" || w == ";" {
			break
		}
		if !strings.HasPrefix(w, "-") {
			pkgs = append(pkgs, w)
		}
	}
	return pkgs
}

// drift returns every difference between the Dockerfile text and targets.
func drift(text string, targets []Target) []string {
	args, stages, err := parseDockerfile(text)
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	report := func(format string, a ...any) { out = append(out, fmt.Sprintf(format, a...)) }
	byName := map[string]*stage{}
	for _, s := range stages {
		byName[s.name] = s
	}
	build := byName["build"]
	if build == nil {
		return []string{"Dockerfile has no build stage"}
	}
	buildRun := strings.Join(build.runs, "\n")
	for _, flag := range []string{"CGO_ENABLED=0", "-trimpath", `-ldflags "-s -w"`} {
		if !strings.Contains(buildRun, flag) {
			report("build stage: no %s (the builder's buildGo uses it)", flag)
		}
	}
	if v := args["KUBEVIRT_VERSION"]; v != KubeVirtVersion {
		report("ARG KUBEVIRT_VERSION=%s, builder KubeVirtVersion=%s", v, KubeVirtVersion)
	}
	covered := map[string]bool{"build": true}
	for _, t := range targets {
		if t.Stage == "" {
			continue
		}
		covered[t.Stage] = true
		s := byName[t.Stage]
		if s == nil {
			report("%s: no Dockerfile stage %q", t.Name, t.Stage)
			continue
		}
		if want := "${" + t.Base.FromArg + "}"; s.from != want {
			report("%s: FROM %s, builder's base stands in for %s", t.Name, s.from, want)
		}
		if image, ok := args[t.Base.FromArg]; !ok {
			report("%s: no ARG %s (its base)", t.Name, t.Base.FromArg)
		} else if image, _, _ = strings.Cut(os.Expand(image, func(k string) string { return args[k] }), "@"); image != t.Base.Image {
			report("%s: ARG %s=%s, builder's base stands in for %s", t.Name, t.Base.FromArg, image, t.Base.Image)
		}
		var want [][3]string
		for _, b := range t.Binaries {
			want = append(want, [3]string{b.SourceStage(), "/out/" + b.Name, b.Path})
			if b.Crate != "" {
				// A Rust program: its own stage runs cargo install, pinned and locked.
				covered[b.SourceStage()] = true
				src := byName[b.SourceStage()]
				if src == nil {
					report("%s: no Dockerfile stage %q builds %s", t.Name, b.SourceStage(), b.Crate)
					continue
				}
				run := os.Expand(strings.Join(src.runs, "\n"), func(k string) string { return args[k] })
				// The crate's source is fetched and patched by hack/<crate>/source.sh,
				// then installed from that path with its own Cargo.lock.
				prep := "bash /src/hack/" + b.Crate + "/source.sh " + b.Version + " /src/" + b.Crate
				cargo := "cargo install --locked --path /src/" + b.Crate
				if !strings.Contains(run, prep) || !strings.Contains(run, cargo) || !strings.Contains(run, "/out/"+b.Name) {
					report("%s: stage %s does not run %s and %s into /out/%s", t.Name, src.name, prep, cargo, b.Name)
				}
				continue
			}
			built := strings.Contains(buildRun, "-o /out/"+b.Name+" "+b.Package)
			if b.Package == "./cmd/"+b.Name {
				loop, _, _ := strings.Cut(buildRun, "; do")
				built = built || (strings.Contains(buildRun, "-o /out/$b ./cmd/$b") && slices.Contains(strings.Fields(loop), b.Name))
			}
			if !built {
				report("%s: the build stage does not build /out/%s from %s", t.Name, b.Name, b.Package)
			}
		}
		if !reflect.DeepEqual(s.copies, want) {
			report("%s: Dockerfile copies %v, builder puts %v", t.Name, s.copies, want)
		}
		if s.user != t.User {
			report("%s: Dockerfile USER %q, builder %q", t.Name, s.user, t.User)
		}
		if !reflect.DeepEqual(s.entrypoint, t.Entrypoint) {
			report("%s: Dockerfile ENTRYPOINT %q, builder %q", t.Name, s.entrypoint, t.Entrypoint)
		}
		var apt []string
		for _, r := range s.runs {
			apt = append(apt, aptInstalled(r)...)
		}
		if apt != nil && !reflect.DeepEqual(apt, t.Base.Debs) {
			report("%s: Dockerfile installs %v, builder %v", t.Name, apt, t.Base.Debs)
		}
		if t.User == fmt.Sprintf("%d:%d", NonrootUID, NonrootUID) && t.Base.User == "" {
			// A base without the nonroot user (Debian) must get it, or ssh
			// fails with "No user exists for uid 65532".
			if !strings.Contains(strings.Join(s.runs, "\n"), fmt.Sprintf("useradd --uid %d", NonrootUID)) {
				report("%s: USER %s on a base without that user and no useradd --uid %d", t.Name, t.User, NonrootUID)
			}
		}
	}
	for _, s := range stages {
		if !covered[s.name] {
			report("Dockerfile stage %q has no builder target", s.name)
		}
	}
	return out
}

func readDockerfile(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "Dockerfile"))
	if err != nil {
		t.Fatalf("read Dockerfile: %v", err)
	}
	return string(b)
}

func TestDockerfileAndBuilderPutTheSameThingsInTheSamePlaces(t *testing.T) {
	g := NewWithT(t)
	g.Expect(drift(readDockerfile(t), Targets())).To(BeEmpty())
}

// The agent stage's COPY lines as the drift check prints them.
const (
	vhostCopy   = "[vhost-device-vsock /out/vhost-device-vsock /usr/local/bin/vhost-device-vsock]"
	agentCopies = "[[build /out/fastpath-agent /usr/local/bin/fastpath-agent] [build /out/fastpath /usr/local/bin/fastpath] " +
		"[build /out/fastpath-ovs-plugin /usr/local/bin/fastpath-ovs-plugin] " + vhostCopy + "]"
)

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

// The check above can fail: each change to one side alone is reported.
func TestDriftIsReported(t *testing.T) {
	df := readDockerfile(t)
	for _, tc := range []struct {
		name   string
		edit   func(ts []Target) []Target
		editDF func(string) string
		want   string
		also   []string // further differences the same edit makes
	}{
		{name: "binary path", edit: func(ts []Target) []Target {
			ts[2].Binaries[1].Path = "/usr/bin/fastpath"
			return ts
		}, want: "agent: Dockerfile copies " + agentCopies + ", " +
			"builder puts [[build /out/fastpath-agent /usr/local/bin/fastpath-agent] [build /out/fastpath /usr/bin/fastpath] [build /out/fastpath-ovs-plugin /usr/local/bin/fastpath-ovs-plugin] " + vhostCopy + "]"},
		{name: "user", edit: func(ts []Target) []Target { ts[1].User = ""; return ts }, want: `operator: Dockerfile USER "65532:65532", builder ""`},
		{name: "entrypoint", edit: func(ts []Target) []Target {
			ts[4].Entrypoint = []string{SidecarShimPath, "--version", "v1alpha2"}
			return ts
		}, want: `domain-hook: Dockerfile ENTRYPOINT ["/sidecar-shim" "--version" "v1alpha3"], builder ["/sidecar-shim" "--version" "v1alpha2"]`},
		{name: "debian package", edit: func(ts []Target) []Target {
			ts[3].Base.Debs = []string{"netperf", "openssh-client"}
			return ts
		}, want: "bench: Dockerfile installs [netperf openssh-client ca-certificates], builder [netperf openssh-client]"},
		{name: "base", edit: func(ts []Target) []Target { ts[2].Base = baseStaticNonroot; return ts }, want: "agent: FROM ${CC_IMAGE}, builder's base stands in for ${STATIC_NONROOT_IMAGE}"},
		{name: "vhost-device-vsock dropped", edit: func(ts []Target) []Target {
			ts[2].Binaries = ts[2].Binaries[:3]
			return ts
		}, want: "agent: Dockerfile copies " + agentCopies + ", builder puts " + strings.Replace(agentCopies, " "+vhostCopy, "", 1),
			also: []string{`Dockerfile stage "vhost-device-vsock" has no builder target`}},
		{name: "vhost-device-vsock path", edit: func(ts []Target) []Target {
			ts[2].Binaries[3].Path = "/usr/bin/vhost-device-vsock"
			return ts
		}, want: "agent: Dockerfile copies " + agentCopies + ", builder puts " + strings.Replace(agentCopies, vhostCopy, "[vhost-device-vsock /out/vhost-device-vsock /usr/bin/vhost-device-vsock]", 1)},
		{name: "vhost-device-vsock version", edit: func(ts []Target) []Target {
			ts[2].Binaries[3].Version = "0.2.0"
			return ts
		}, want: "agent: stage vhost-device-vsock does not run bash /src/hack/vhost-device-vsock/source.sh 0.2.0 /src/vhost-device-vsock and cargo install --locked --path /src/vhost-device-vsock into /out/vhost-device-vsock"},
		{name: "Dockerfile drops vhost-device-vsock", editDF: func(s string) string {
			return strings.Replace(s, "COPY --from=vhost-device-vsock /out/vhost-device-vsock /usr/local/bin/vhost-device-vsock\n", "", 1)
		}, want: "agent: Dockerfile copies " + strings.Replace(agentCopies, " "+vhostCopy, "", 1) + ", builder puts " + agentCopies},
		{name: "Dockerfile vhost-device-vsock path", editDF: func(s string) string {
			return strings.Replace(s, "/out/vhost-device-vsock /usr/local/bin/vhost-device-vsock", "/out/vhost-device-vsock /usr/bin/vhost-device-vsock", 1)
		}, want: "agent: Dockerfile copies " + strings.Replace(agentCopies, vhostCopy, "[vhost-device-vsock /out/vhost-device-vsock /usr/bin/vhost-device-vsock]", 1) + ", builder puts " + agentCopies},
		{name: "Dockerfile vhost-device-vsock version", editDF: func(s string) string {
			return strings.Replace(s, "VHOST_DEVICE_VSOCK_VERSION="+VhostDeviceVsockVersion, "VHOST_DEVICE_VSOCK_VERSION=0.2.0", 1)
		}, want: "agent: stage vhost-device-vsock does not run bash /src/hack/vhost-device-vsock/source.sh " + VhostDeviceVsockVersion + " /src/vhost-device-vsock and cargo install --locked --path /src/vhost-device-vsock into /out/vhost-device-vsock"},
		{name: "Dockerfile cargo without --locked", editDF: func(s string) string { return strings.Replace(s, "cargo install --locked ", "cargo install ", 1) },
			want: "agent: stage vhost-device-vsock does not run bash /src/hack/vhost-device-vsock/source.sh " + VhostDeviceVsockVersion + " /src/vhost-device-vsock and cargo install --locked --path /src/vhost-device-vsock into /out/vhost-device-vsock"},
		{name: "Dockerfile agent base", editDF: func(s string) string {
			return strings.Replace(s, "FROM ${CC_IMAGE} AS agent", "FROM ${STATIC_IMAGE} AS agent", 1)
		},
			want: "agent: FROM ${STATIC_IMAGE}, builder's base stands in for ${CC_IMAGE}"},
		{name: "Dockerfile base image", editDF: func(s string) string {
			return strings.Replace(s, "ARG CC_IMAGE=gcr.io/distroless/cc-debian12", "ARG CC_IMAGE=gcr.io/distroless/static-debian12", 1)
		}, want: "agent: ARG CC_IMAGE=gcr.io/distroless/static-debian12, builder's base stands in for gcr.io/distroless/cc-debian12"},
		{name: "Dockerfile base ARG dropped", editDF: func(s string) string {
			return strings.Replace(s, "ARG CC_IMAGE=gcr.io/distroless/cc-debian12\n", "", 1)
		}, want: "agent: no ARG CC_IMAGE (its base)"},
		{name: "missing stage", edit: func(ts []Target) []Target { return ts[:4] }, want: `Dockerfile stage "domain-hook" has no builder target`},
		{name: "Dockerfile path", editDF: func(s string) string {
			return strings.Replace(s, "/out/fastpath-domain-hook /usr/bin/onDefineDomain", "/out/fastpath-domain-hook /usr/local/bin/onDefineDomain", 1)
		}, want: "domain-hook: Dockerfile copies [[build /out/fastpath-domain-hook /usr/local/bin/onDefineDomain]], builder puts [[build /out/fastpath-domain-hook /usr/bin/onDefineDomain]]"},
		{name: "Dockerfile build flags", editDF: func(s string) string { return strings.ReplaceAll(s, "-trimpath ", "") },
			want: "build stage: no -trimpath (the builder's buildGo uses it)"},
		{name: "Dockerfile binary not built", editDF: func(s string) string {
			return strings.Replace(s, "fastpath-agent fastpath-bench fastpath-domain-hook", "fastpath-agent fastpath-domain-hook", 1)
		},
			want: "bench: the build stage does not build /out/fastpath-bench from ./cmd/fastpath-bench"},
		{name: "Dockerfile nonroot user", editDF: func(s string) string { return strings.Replace(s, "useradd --uid 65532", "true", 1) },
			want: "bench: USER 65532:65532 on a base without that user and no useradd --uid 65532"},
		{name: "KubeVirt version", editDF: func(s string) string {
			return strings.Replace(s, "KUBEVIRT_VERSION="+KubeVirtVersion, "KUBEVIRT_VERSION=v1.5.0", 1)
		}, want: "ARG KUBEVIRT_VERSION=v1.5.0, builder KubeVirtVersion=" + KubeVirtVersion,
			also: []string{"domain-hook: ARG SIDECAR_SHIM_IMAGE=quay.io/kubevirt/sidecar-shim:v1.5.0, builder's base stands in for " + baseSidecarShim.Image}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ts, text := Targets(), df
			if tc.edit != nil {
				ts = tc.edit(ts)
			}
			if tc.editDF != nil {
				text = tc.editDF(text)
				g.Expect(text).NotTo(Equal(df), "the edit changed nothing")
			}
			g.Expect(drift(text, ts)).To(ConsistOf(append([]string{tc.want}, tc.also...)))
		})
	}
}
