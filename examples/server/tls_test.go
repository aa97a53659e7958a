package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// selfSigned writes a certificate for 127.0.0.1, or for the DNS names
// given, and its key, and returns their paths and the certificate.
func selfSigned(t *testing.T, names ...string) (certFile, keyFile string, cert *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	template := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "blockrpc test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	if len(names) > 0 {
		template.DNSNames = names
	} else {
		template.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	if cert, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, cert
}

// TestTLS serves HTTPS with a certificate made for the test, and queries it
// over HTTP/2 with a client that trusts that certificate alone.
func TestTLS(t *testing.T) {
	certFile, keyFile, cert := selfSigned(t)
	srv := start(t, "-addr", "127.0.0.1:0", "-keys", "k", "-tls-cert", certFile, "-tls-key", keyFile)
	url := srv.rpcURL(t)
	if !strings.HasPrefix(url, "https://") {
		t.Fatalf("the endpoint printed is %s, want https://", url)
	}
	for _, line := range srv.curlLines(t) {
		if !strings.Contains(line, " https://") {
			t.Errorf("a printed curl line is not for https: %s", line)
		}
	}

	roots := x509.NewCertPool()
	roots.AddCert(cert)
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots},
		// A Transport given its own TLS config speaks HTTP/1.1 unless
		// asked to try HTTP/2.
		ForceAttemptHTTP2: true,
	}}
	defer client.CloseIdleConnections()
	resp, body := call(t, client, url+"k", latestBlock)
	if resp.StatusCode != 200 || !strings.Contains(body, `"number":"0x6e"`) {
		t.Errorf("over HTTPS: %d %.200s, want the latest block, 0x6e", resp.StatusCode, body)
	}
	if resp.ProtoMajor != 2 {
		t.Errorf("over HTTPS the protocol is %s, want HTTP/2", resp.Proto)
	}
	if resp.TLS == nil || resp.TLS.Version < tls.VersionTLS12 {
		t.Errorf("TLS state %+v, want TLS 1.2 or later", resp.TLS)
	}

	// Old protocol versions are refused.
	old := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MaxVersion: tls.VersionTLS11, MinVersion: tls.VersionTLS10}}}
	if _, err := old.Post(url+"k", "application/json", strings.NewReader(latestBlock)); err == nil {
		t.Error("a TLS 1.1 client was served")
	}
	// Plain HTTP on the HTTPS port gets no answer.
	if resp, _ := call(t, http.DefaultClient, "http://"+strings.TrimPrefix(url, "https://")+"k", latestBlock); resp.StatusCode == 200 {
		t.Error("plain HTTP is served on the HTTPS listener")
	}
	srv.stop(t)
}

// TestTLSNamedCertificate serves HTTPS with a certificate for a DNS name,
// as a public CA signs one: the curl lines name the server by it, and
// work as printed for a client that trusts the issuer and finds the name
// at the listener's address.
func TestTLSNamedCertificate(t *testing.T) {
	const name = "rpc.example.test"
	certFile, keyFile, cert := selfSigned(t, name)
	srv := start(t, "-addr", "127.0.0.1:0", "-keys", "k", "-tls-cert", certFile, "-tls-key", keyFile)
	lines := srv.curlLines(t)
	if len(lines) == 0 {
		t.Fatalf("no curl line printed:\n%s", srv.stdout())
	}
	m := regexp.MustCompile(`--data '([^']*)' (https://([^/]+)/\S+)$`).FindStringSubmatch(lines[0])
	if m == nil {
		t.Fatalf("a curl line without an https URL: %s", lines[0])
	}
	host, port, err := net.SplitHostPort(m[3])
	if err != nil || host != name {
		t.Fatalf("the curl line names %s, want the certificate's name %s: %s", m[3], name, lines[0])
	}
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	var dialer net.Dialer
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots},
		// The name's DNS record, for this test alone.
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", port))
		},
	}}
	defer client.CloseIdleConnections()
	resp, err := client.Post(strings.Replace(m[2], "<API_KEY>", "k", 1), "application/json", strings.NewReader(m[1]))
	if err != nil {
		t.Fatalf("the printed curl line, with a client that trusts the certificate: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the printed curl line: status %d", resp.StatusCode)
	}
}
