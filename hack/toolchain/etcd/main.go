// Command etcd is the etcd server the local cluster runs, built from its Go
// module because `go install` refuses etcd's replace directives.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
