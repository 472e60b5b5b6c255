package images

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Platform is the one platform built here. containerd's `ctr images import`
// drops an image whose config has no os/architecture ("image might be
// filtered out"), so it is set in the config and on the archive's index entry.
var Platform = v1.Platform{OS: "linux", Architecture: "amd64"}

// Annotations on an archive's index entry: containerd names the imported image
// after AnnotationImageName; AnnotationRefName is the OCI image-layout name.
const (
	AnnotationImageName = "io.containerd.image.name"
	AnnotationRefName   = "org.opencontainers.image.ref.name"
)

// Config is the runtime part of an image config.
type Config struct {
	// Entrypoint and Cmd as in a Dockerfile's exec form.
	Entrypoint, Cmd []string
	// User is "uid[:gid]"; empty means root.
	User string
	// Env is KEY=value pairs.
	Env []string
	// WorkingDir is an absolute path; empty means "/".
	WorkingDir string
	// Labels are the image's labels.
	Labels map[string]string
}

// LayerSpec is one layer with the history line describing it.
type LayerSpec struct {
	Layer     v1.Layer
	CreatedBy string
}

// Image assembles an OCI image (OCI manifest and config media types) from
// layers, bottom first, with config cfg, platform Platform and every time at
// Epoch.
func Image(layers []LayerSpec, cfg Config) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	adds := make([]mutate.Addendum, 0, len(layers))
	for _, l := range layers {
		adds = append(adds, mutate.Addendum{
			Layer: l.Layer, MediaType: types.OCILayer,
			History: v1.History{Created: v1.Time{Time: Epoch}, CreatedBy: l.CreatedBy, Comment: "fastpath make images"},
		})
	}
	img, err := mutate.Append(img, adds...)
	if err != nil {
		return nil, fmt.Errorf("failed to append layers: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("failed to read config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = Platform.OS, Platform.Architecture
	cf.Created = v1.Time{Time: Epoch}
	cf.Config.Entrypoint = cfg.Entrypoint
	cf.Config.Cmd = cfg.Cmd
	cf.Config.User = cfg.User
	cf.Config.Env = cfg.Env
	cf.Config.WorkingDir = cfg.WorkingDir
	cf.Config.Labels = cfg.Labels
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("failed to set config: %w", err)
	}
	return img, nil
}

// WriteArchive writes img as an OCI image-layout tar at path (replaced
// atomically), its one index entry named ref (e.g. "localhost/pause:local")
// and carrying Platform.
func WriteArchive(path, ref string, img v1.Image) error {
	dir, err := os.MkdirTemp(filepath.Dir(path), ".layout-")
	if err != nil {
		return fmt.Errorf("failed to make a layout directory for %s: %w", path, err)
	}
	defer os.RemoveAll(dir)
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("failed to start layout %s: %w", dir, err)
	}
	p := Platform
	if err := lp.AppendImage(img,
		layout.WithAnnotations(map[string]string{AnnotationImageName: ref, AnnotationRefName: ref}),
		layout.WithPlatform(p)); err != nil {
		return fmt.Errorf("failed to write image %s: %w", ref, err)
	}
	tmp := path + ".tmp"
	if err := tarDir(dir, tmp); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// tarDir writes the regular files and directories under dir into the tar file
// out, sorted, with times at Epoch.
func tarDir(dir, out string) error {
	var files []File
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			files = append(files, Dir("/"+rel, 0o755))
		} else {
			files = append(files, Copy(p, "/"+rel, 0o644))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("failed to walk layout %s: %w", dir, err)
	}
	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("failed to create %s: %w", out, err)
	}
	if err := Tar(f, files); err != nil {
		f.Close()
		return fmt.Errorf("failed to write %s: %w", out, err)
	}
	return f.Close()
}

// Archived is one image read back from an archive.
type Archived struct {
	// Ref is the index entry's AnnotationImageName.
	Ref string
	// Platform is the index entry's platform (nil when absent).
	Platform *v1.Platform
	Image    v1.Image
}

// ReadArchive unpacks the OCI image-layout tar at path into dir (which must
// exist and stay while the images are used) and returns its images.
func ReadArchive(path, dir string) ([]Archived, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("failed to open archive %s: %w", path, err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("failed to read archive %s: %w", path, err)
		}
		target := filepath.Join(dir, filepath.FromSlash(hdr.Name))
		if !filepath.IsLocal(filepath.FromSlash(hdr.Name)) {
			return nil, fmt.Errorf("failed to read archive %s: entry %q leaves the layout", path, hdr.Name)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(target, 0o755)
		case tar.TypeReg:
			err = writeFile(target, tr)
		}
		if err != nil {
			return nil, fmt.Errorf("failed to unpack %s from %s: %w", hdr.Name, path, err)
		}
	}
	lp, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("failed to open layout of %s: %w", path, err)
	}
	idx, err := lp.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("failed to read index of %s: %w", path, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("failed to read index of %s: %w", path, err)
	}
	var out []Archived
	for _, d := range im.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			return nil, fmt.Errorf("failed to read image %s of %s: %w", d.Digest, path, err)
		}
		out = append(out, Archived{Ref: d.Annotations[AnnotationImageName], Platform: d.Platform, Image: img})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Ref < out[j].Ref })
	return out, nil
}

func writeFile(path string, r io.Reader) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
