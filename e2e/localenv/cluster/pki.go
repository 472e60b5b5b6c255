package cluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// certValidity is how long every certificate of the cluster is valid: the
// cluster is for a session, not for a year.
const certValidity = 30 * 24 * time.Hour

// A client identity of the cluster: the user name (certificate CN) and groups
// (O) the API server sees.
type identity struct {
	file   string // kubeconfig and certificate base name
	user   string
	groups []string
}

// identities are the clients the cluster's components and the admin use.
func (o Options) identities() []identity {
	return []identity{
		{file: "admin", user: "fastpath-cluster-admin", groups: []string{"system:masters"}},
		{file: "kube-controller-manager", user: "system:kube-controller-manager"},
		{file: "kube-scheduler", user: "system:kube-scheduler"},
		{file: "kubelet", user: "system:node:" + o.NodeName, groups: []string{"system:nodes"}},
		{file: "kube-proxy", user: "system:kube-proxy"},
		// Multus's thin plugin reads pods and NetworkAttachmentDefinitions and
		// writes the network-status annotation: bound to Multus's own ClusterRole.
		{file: "multus", user: MultusUser},
	}
}

// MultusUser is the user Multus's thin plugin authenticates as.
const MultusUser = "multus"

// pki is the cluster's CA and the files made from it.
type pki struct {
	dir    string
	ca     *x509.Certificate
	caKey  crypto.Signer
	caPEM  []byte
	serial int64
}

// writePKI makes the CA, the serving certificates (kube-apiserver with the
// kubernetes Service's address and names; the kubelet), the API server's
// client certificate for kubelets, the service-account key pair, and one
// kubeconfig per identity (certificates embedded), the admin's at
// layout.adminKubeconfig.
func (o Options) writePKI() error {
	l := o.layout()
	for _, d := range []string{l.pki, l.kubeconfigs} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("failed to create %s: %w", d, err)
		}
	}
	caKey, err := newKey()
	if err != nil {
		return err
	}
	ca, err := certutil.NewSelfSignedCACert(certutil.Config{CommonName: "fastpath-cluster-ca"}, caKey)
	if err != nil {
		return fmt.Errorf("failed to create the cluster CA: %w", err)
	}
	p := &pki{dir: l.pki, ca: ca, caKey: caKey, caPEM: pemCert(ca), serial: 1}
	if err := p.write("ca", ca, caKey); err != nil {
		return err
	}

	svc := o.serviceIP()
	apiIPs := []net.IP{net.ParseIP("127.0.0.1"), net.IP(o.NodeIP.AsSlice()), net.IP(svc.AsSlice())}
	apiNames := []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost", o.NodeName}
	if err := p.issue("apiserver", pkix.Name{CommonName: "kube-apiserver"}, apiNames, apiIPs, x509.ExtKeyUsageServerAuth); err != nil {
		return err
	}
	if err := p.issue("kubelet-serving", pkix.Name{CommonName: o.NodeName}, []string{o.NodeName, "localhost"},
		[]net.IP{net.IP(o.NodeIP.AsSlice()), net.ParseIP("127.0.0.1")}, x509.ExtKeyUsageServerAuth); err != nil {
		return err
	}
	// kube-apiserver's identity towards kubelets (exec, logs, port-forward).
	if err := p.issue("apiserver-kubelet-client", pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		nil, nil, x509.ExtKeyUsageClientAuth); err != nil {
		return err
	}

	if err := writeFrontProxyPKI(l.pki); err != nil {
		return err
	}

	saKey, err := newKey()
	if err != nil {
		return err
	}
	saPriv, err := keyutil.MarshalPrivateKeyToPEM(saKey)
	if err != nil {
		return fmt.Errorf("failed to encode the service-account key: %w", err)
	}
	saDER, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return fmt.Errorf("failed to encode the service-account public key: %w", err)
	}
	saPub := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saDER})
	if err := keyutil.WriteKey(filepath.Join(l.pki, "sa.key"), saPriv); err != nil {
		return fmt.Errorf("failed to write the service-account key: %w", err)
	}
	if err := os.WriteFile(filepath.Join(l.pki, "sa.pub"), saPub, 0o644); err != nil {
		return fmt.Errorf("failed to write the service-account public key: %w", err)
	}

	server := fmt.Sprintf("https://%s", net.JoinHostPort(o.NodeIP.String(), fmt.Sprint(APIServerPort)))
	for _, id := range o.identities() {
		crt, key, err := p.sign(pkix.Name{CommonName: id.user, Organization: id.groups}, nil, nil, x509.ExtKeyUsageClientAuth)
		if err != nil {
			return err
		}
		keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
		if err != nil {
			return fmt.Errorf("failed to encode the key of %s: %w", id.user, err)
		}
		path := l.kubeconfig(id.file)
		if id.file == "admin" {
			path = l.adminKubeconfig
		}
		if err := writeKubeconfig(path, server, p.caPEM, pemCert(crt), keyPEM, id.user); err != nil {
			return err
		}
	}
	for _, n := range o.plannedNodes() {
		if err := o.writeNodePKI(p, n, server); err != nil {
			return err
		}
	}
	return nil
}

// writeNodePKI writes a node's own files of the cluster's PKI into its
// directory: the CA certificate, the kubelet's serving certificate (its
// name and address) and its kubeconfig (system:node:<name>, as the Node
// authorizer and NodeRestriction want), and copies of the kube-proxy and
// Multus kubeconfigs.
func (o Options) writeNodePKI(p *pki, n nodeState, server string) error {
	nl := o.nodeOptions(n).layout()
	for _, d := range []string{nl.pki, nl.kubeconfigs} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("failed to create %s: %w", d, err)
		}
	}
	if err := certutil.WriteCert(filepath.Join(nl.pki, "ca.crt"), p.caPEM); err != nil {
		return err
	}
	np := *p
	np.dir = nl.pki
	defer func() { p.serial = np.serial }()
	if err := np.issue("kubelet-serving", pkix.Name{CommonName: n.Name}, []string{n.Name, "localhost"},
		[]net.IP{net.IP(n.IP.AsSlice()), net.ParseIP("127.0.0.1")}, x509.ExtKeyUsageServerAuth); err != nil {
		return err
	}
	user := "system:node:" + n.Name
	crt, key, err := np.sign(pkix.Name{CommonName: user, Organization: []string{"system:nodes"}}, nil, nil, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return err
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return fmt.Errorf("failed to encode the key of %s: %w", user, err)
	}
	if err := writeKubeconfig(nl.kubeconfig("kubelet"), server, p.caPEM, pemCert(crt), keyPEM, user); err != nil {
		return err
	}
	l := o.layout()
	for _, c := range []string{"kube-proxy", "multus"} {
		if err := copyFile(l.kubeconfig(c), nl.kubeconfig(c), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// FrontProxyClientName is the CN of kube-apiserver's client certificate
// towards aggregated API servers (--requestheader-allowed-names), kubeadm's
// name for it.
const FrontProxyClientName = "front-proxy-client"

// writeFrontProxyPKI makes the API aggregation layer's own CA
// (front-proxy-ca) and kube-apiserver's client certificate signed by it
// (front-proxy-client): an aggregated API server (KubeVirt's virt-api, the
// metrics server) trusts the user headers of a request only when it comes
// with that certificate, and reads the CA from the
// extension-apiserver-authentication ConfigMap kube-apiserver publishes
// from --requestheader-client-ca-file. A CA apart from the cluster's, as
// kubeadm makes, so that no client certificate of the cluster CA can pose
// as the front proxy.
func writeFrontProxyPKI(dir string) error {
	key, err := newKey()
	if err != nil {
		return err
	}
	ca, err := certutil.NewSelfSignedCACert(certutil.Config{CommonName: "front-proxy-ca"}, key)
	if err != nil {
		return fmt.Errorf("failed to create the front-proxy CA: %w", err)
	}
	fp := &pki{dir: dir, ca: ca, caKey: key, caPEM: pemCert(ca), serial: 1}
	if err := fp.write("front-proxy-ca", ca, key); err != nil {
		return err
	}
	return fp.issue("front-proxy-client", pkix.Name{CommonName: FrontProxyClientName}, nil, nil, x509.ExtKeyUsageClientAuth)
}

// writeKubeconfig writes a kubeconfig (mode 0600) for one user of the cluster.
func writeKubeconfig(path, server string, caPEM, certPEM, keyPEM []byte, user string) error {
	const name = "fastpath-cluster"
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: user}
	cfg.CurrentContext = name
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("failed to write kubeconfig %s: %w", path, err)
	}
	return os.Chmod(path, 0o600)
}

func newKey() (*ecdsa.PrivateKey, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("failed to generate a key: %w", err)
	}
	return k, nil
}

// issue signs a new key's certificate and writes <name>.crt and <name>.key.
func (p *pki) issue(name string, subject pkix.Name, dns []string, ips []net.IP, usage x509.ExtKeyUsage) error {
	crt, key, err := p.sign(subject, dns, ips, usage)
	if err != nil {
		return err
	}
	return p.write(name, crt, key)
}

// sign makes a key and a certificate for it signed by the CA.
func (p *pki) sign(subject pkix.Name, dns []string, ips []net.IP, usage x509.ExtKeyUsage) (*x509.Certificate, crypto.Signer, error) {
	key, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	p.serial++
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.serial),
		Subject:      subject,
		DNSNames:     dns,
		IPAddresses:  ips,
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, key.Public(), p.caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to sign the certificate of %s: %w", subject.CommonName, err)
	}
	crt, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to parse the certificate of %s: %w", subject.CommonName, err)
	}
	return crt, key, nil
}

// write writes <dir>/<name>.crt (0644) and <name>.key (0600).
func (p *pki) write(name string, crt *x509.Certificate, key crypto.Signer) error {
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return fmt.Errorf("failed to encode the key %s: %w", name, err)
	}
	if err := certutil.WriteCert(filepath.Join(p.dir, name+".crt"), pemCert(crt)); err != nil {
		return fmt.Errorf("failed to write the certificate %s: %w", name, err)
	}
	if err := keyutil.WriteKey(filepath.Join(p.dir, name+".key"), keyPEM); err != nil {
		return fmt.Errorf("failed to write the key %s: %w", name, err)
	}
	return nil
}

func pemCert(c *x509.Certificate) []byte {
	b, _ := certutil.EncodeCertificates(c)
	return b
}
