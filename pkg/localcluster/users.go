package localcluster

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/mpijob/mpijob/pkg/localcluster/pki"
)

// User is a person the local cluster knows by a static token, with the
// namespace their kubeconfig context points at.
type User struct {
	// Name is the Kubernetes user name and the kubeconfig context name.
	Name string
	// Namespace is the context's default namespace.
	Namespace string
	// ClusterRole is bound to the user in Namespace ("" for none).
	ClusterRole string
	// Groups are extra groups the token carries.
	Groups []string
}

// Users are the people of the local cluster. admin is cluster-admin; the
// others are namespace-scoped so RBAC tests have something real to hit.
var Users = []User{
	{Name: "admin", Namespace: "default", Groups: []string{"system:masters"}},
	{Name: "dev-a", Namespace: "team-a", ClusterRole: "edit"},
	{Name: "dev-b", Namespace: "team-b", ClusterRole: "edit"},
	{Name: "viewer-a", Namespace: "team-a", ClusterRole: "view"},
}

// writeTokens writes the apiserver's --token-auth-file with a fresh random
// token per user and returns them by user name.
func writeTokens(path string) (map[string]string, error) {
	tokens := map[string]string{}
	var b strings.Builder
	for _, u := range Users {
		raw := make([]byte, 24)
		if _, err := rand.Read(raw); err != nil {
			return nil, err
		}
		tok := hex.EncodeToString(raw)
		tokens[u.Name] = tok
		fmt.Fprintf(&b, "%s,%s,%s,\"%s\"\n", tok, u.Name, u.Name, strings.Join(append([]string{"system:authenticated"}, u.Groups...), ","))
	}
	return tokens, os.WriteFile(path, []byte(b.String()), 0o600)
}

func server() string { return fmt.Sprintf("https://127.0.0.1:%d", APIServerPort) }

// writeCertKubeconfig writes a kubeconfig that authenticates with the
// client certificate pki/NAME.{crt,key}.
func writeCertKubeconfig(path string, p *pki.PKI, name string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: server(), CertificateAuthority: p.Path("ca", "crt")}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificate: p.Path(name, "crt"), ClientKey: p.Path(name, "key")}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: "local", AuthInfo: name}
	cfg.CurrentContext = name
	return clientcmd.WriteToFile(*cfg, path)
}

// writeUserKubeconfig writes the kubeconfig people use: the admin context
// (client certificate) is current, and every user has a context of their own.
func writeUserKubeconfig(path string, p *pki.PKI, tokens map[string]string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["mpijob-local"] = &clientcmdapi.Cluster{Server: server(), CertificateAuthorityData: p.CAPEM}
	for _, u := range Users {
		ai := &clientcmdapi.AuthInfo{Token: tokens[u.Name]}
		if u.Name == "admin" {
			crt, err := os.ReadFile(p.Path("admin", "crt"))
			if err != nil {
				return err
			}
			key, err := os.ReadFile(p.Path("admin", "key"))
			if err != nil {
				return err
			}
			ai = &clientcmdapi.AuthInfo{ClientCertificateData: crt, ClientKeyData: key}
		}
		cfg.AuthInfos[u.Name] = ai
		cfg.Contexts[u.Name] = &clientcmdapi.Context{Cluster: "mpijob-local", AuthInfo: u.Name, Namespace: u.Namespace}
	}
	cfg.CurrentContext = "admin"
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return clientcmd.WriteToFile(*cfg, path)
}
