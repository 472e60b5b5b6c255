package images

import (
	"testing"

	. "github.com/onsi/gomega"
)

// ctr images ls as containerd 1.6 prints it (columns abridged after DIGEST).
const lsOutput = `REF                                         TYPE                                       DIGEST                                                                  SIZE     PLATFORMS   LABELS
localhost/fastpath-guest:local              application/vnd.oci.image.manifest.v1+json sha256:41c8baf6d920cff43654a21d60ca60b09ab4cc6a207bc5b209b2da412734d815 21.0 MiB linux/amd64 io.cri-containerd.image=managed
localhost/kubevirt/virt-api:v1.7.0          application/vnd.oci.image.manifest.v1+json sha256:c6f900aaafa7c1fd163cf928144356bed0b8192befec50ee0da1ff254066313f 21.5 MiB linux/amd64 io.cri-containerd.image=managed
localhost/kubevirt/virt-api@sha256:c6f900aaafa7c1fd163cf928144356bed0b8192befec50ee0da1ff254066313f application/vnd.oci.image.manifest.v1+json sha256:c6f900aaafa7c1fd163cf928144356bed0b8192befec50ee0da1ff254066313f 21.5 MiB linux/amd64 io.cri-containerd.image=managed
reg.example:5000/team/app:v2                application/vnd.oci.image.manifest.v1+json sha256:1111111111111111111111111111111111111111111111111111111111111111 1.0 MiB  linux/amd64 -
sha256:9c247b21d79dafcf52eb7d745069b1af06bb387c4d1ca515e3a2ad6ce1743eef application/vnd.oci.image.manifest.v1+json sha256:41c8baf6d920cff43654a21d60ca60b09ab4cc6a207bc5b209b2da412734d815 21.0 MiB linux/amd64 io.cri-containerd.image=managed
`

func TestDigestNamesNameEachTaggedImageByItsManifestOnce(t *testing.T) {
	g := NewWithT(t)
	g.Expect(digestNames(lsOutput)).To(Equal([][2]string{
		{"localhost/fastpath-guest:local", "localhost/fastpath-guest@sha256:41c8baf6d920cff43654a21d60ca60b09ab4cc6a207bc5b209b2da412734d815"},
		{"reg.example:5000/team/app:v2", "reg.example:5000/team/app@sha256:1111111111111111111111111111111111111111111111111111111111111111"},
	}), "virt-api has its digest name already; a bare image ID and a digest name get none; a registry's port is not a tag")
	g.Expect(digestNames("REF TYPE DIGEST\n")).To(BeEmpty())
}
