package images

import (
	"fmt"
	"path"
	"strings"
)

// Containerfile renders the recipe that buildImage follows for im (the
// same packages, setup, files and environment) as a Containerfile, for
// people who build the images with a container engine. images/*/Containerfile
// are these, written by `go run ./hack/containerfiles`;
// TestContainerfilesAreTheRecipe fails when one differs. The build context
// is the repository root.
func (im Image) Containerfile() string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w("# GENERATED from pkg/localcluster/images/images.go by `go run ./hack/containerfiles`:\n")
	w("# the recipe `make images` and the local cluster build %s from. Edit images.go, not this file.\n", im.Ref)
	w("# Build from the repository root:\n#   podman build -f images/%s/Containerfile -t %s .\n", im.Dir, im.Ref)
	w("FROM docker.io/library/debian:%s AS base\n", im.suite())
	w("RUN %s \\\n && %s\n\n", aptGet(basePackages), run(baseSetup))

	w("# The throw-away build stage: %s compiled with the image's MPI", strings.Join(cPrograms, " and "))
	if im.BuildSetup != "" {
		w(", wheels compiled into /tmp/wheels")
	}
	w(".\nFROM base AS build\n")
	for _, p := range cPrograms {
		w("COPY images/common/%s.c /tmp/%s.c\n", p, p)
	}
	w("RUN %s\n", aptGet(append(append([]string{}, im.Packages...), im.BuildPackages...)))
	if s := run(im.Setup); s != "" {
		w("RUN %s\n", s)
	}
	if s := run(im.BuildSetup); s != "" {
		w("RUN %s\n", s)
	}
	w("RUN %s && mkdir -p /tmp/wheels\n\n", im.compileScript())

	w("FROM base\n")
	w("COPY --from=build /tmp/wheels /tmp/wheels\n")
	w("RUN %s\n", aptGet(im.Packages))
	if s := run(im.Setup); s != "" {
		w("RUN %s\n", s)
	}
	if s := run(im.Install); s != "" {
		w("RUN %s\n", s)
	}
	if im.Check != "" {
		w("# The image's check: a build that fails it fails.\nRUN %s\n", run(im.Check))
	}
	w("# The stack hook in every Python's site-packages (kubectl mpijob stacks).\nRUN %s\n", run(stacksHook))
	w("RUN rm -rf /tmp/wheels && apt-get clean && rm -rf /var/lib/apt/lists/*\n")
	for _, p := range cPrograms {
		w("COPY --from=build --chmod=0755 /tmp/%s /usr/local/bin/%s\n", p, p)
	}
	for _, f := range commonFiles {
		chmod := ""
		if strings.HasPrefix(f.dst, "/usr/local/bin/") {
			chmod = "--chmod=0755 "
		}
		w("COPY %s%s %s\n", chmod, path.Join("images", f.src), f.dst)
	}
	for _, src := range sortedKeys(im.Files) {
		dst := im.Files[src]
		mode := "0644"
		if strings.HasPrefix(dst, "/usr/local/bin/") {
			mode = "0755"
		}
		w("COPY --chmod=%s %s %s\n", mode, path.Clean(path.Join("images", src)), dst)
	}
	if env := sshEnv(im.Env); env != "" {
		w("RUN printf '%%s\\n' %s >> /home/mpiuser/.sshd_config\n", shellQuoteLines(env))
	}
	w("RUN chown 1000:1000 /home/mpiuser/.sshd_config\n")
	w("ENV")
	for _, e := range imageEnv(im.Env) {
		k, v, _ := strings.Cut(e, "=")
		w(" \\\n    %s=%q", k, v)
	}
	w("\nLABEL org.opencontainers.image.source=\"mpijob images/%s\"\n", im.Dir)
	w("USER 1000\nWORKDIR /home/mpiuser\nCMD [\"/bin/bash\"]\n")
	return b.String()
}

// aptGet installs pkgs as the build does.
func aptGet(pkgs []string) string {
	return "apt-get update -qq && apt-get install -y -qq --no-install-recommends " + strings.Join(pkgs, " ")
}

// run joins a script's lines into one RUN's commands.
func run(script string) string {
	var lines []string
	for _, l := range strings.Split(script, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, " \\\n && ")
}

// shellQuoteLines quotes each line of s for printf '%s\n'.
func shellQuoteLines(s string) string {
	var out []string
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		out = append(out, "'"+strings.ReplaceAll(l, "'", `'\''`)+"'")
	}
	return strings.Join(out, " ")
}
