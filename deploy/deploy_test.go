// Package deploy holds no code: only the container and cluster files of Shoal. Its test checks that
// they parse and agree with each other and with the binary's flags; it starts nothing.
package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v2"
)

// shoalBinary is the binary built by `make build`; flag checks are skipped without it.
const shoalBinary = "../bin/shoal"

// checkFlags runs `shoal <args> --print-config`, which validates the flags and exits without starting
// a node, if the binary was built.
func checkFlags(t *testing.T, args []string) {
	t.Helper()
	if _, err := os.Stat(shoalBinary); err != nil {
		t.Logf("skipping the flag check of %q: %s not built (make build)", args, shoalBinary)
		return
	}
	out, err := exec.Command(shoalBinary, append(slices.Clone(args), "--print-config")...).CombinedOutput()
	if err != nil {
		t.Errorf("shoal %s --print-config: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// flagValue returns the value of --name in args (given as "--name=v" or "--name v") and whether it is there.
func flagValue(args []string, name string) (string, bool) {
	for i, a := range args {
		if a == "--"+name {
			if i+1 < len(args) && !strings.HasPrefix(args[i+1], "--") {
				return args[i+1], true
			}
			return "", true
		}
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	froms := 0
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "FROM":
			froms++
			if len(f) < 2 || f[1] != "scratch" {
				t.Errorf("%q: the image must build without a registry, from scratch only", line)
			}
		case "RUN":
			t.Errorf("%q: a scratch image has no shell to RUN", line)
		case "ENTRYPOINT":
			if strings.Join(f[1:], " ") != `["/shoal"]` {
				t.Errorf("%q: want ENTRYPOINT [\"/shoal\"] (exec form: there is no shell)", line)
			}
		}
	}
	if froms == 0 {
		t.Errorf("Dockerfile has no FROM")
	}
	ignore, err := os.ReadFile(".dockerignore")
	if err != nil || !strings.Contains(string(ignore), "!shoal") {
		t.Errorf(".dockerignore must send only the binary (and rootfs/) as build context: %v", err)
	}
}

type composeService struct {
	Image       string                       `yaml:"image"`
	Command     []string                     `yaml:"command"`
	Volumes     []string                     `yaml:"volumes"`
	Ports       []string                     `yaml:"ports"`
	NetworkMode string                       `yaml:"network_mode"`
	Profiles    []string                     `yaml:"profiles"`
	DependsOn   map[string]map[string]string `yaml:"depends_on"`
	Health      any                          `yaml:"healthcheck"`
}

// composeDefaults expands ${VAR:-default} as compose does with VAR unset.
func composeDefaults(s string) string {
	return regexp.MustCompile(`\$\{\w+:-([^}]*)\}`).ReplaceAllString(s, "$1")
}

func TestCompose(t *testing.T) {
	b, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Services map[string]composeService `yaml:"services"`
		Volumes  map[string]any            `yaml:"volumes"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	// One shared volume: a node's directory exists only once the node ran, so the profile's nodes
	// create no volume of their own when the profile is off.
	if _, ok := c.Volumes["shoal-data"]; !ok || len(c.Volumes) != 1 {
		t.Errorf("volumes %v: want the one shared volume shoal-data", c.Volumes)
	}
	listens := map[string]string{} // every listening address -> its node and flag, to catch clashes
	grpcAddr := map[int]string{}
	for i := 1; i <= 5; i++ {
		name := "node" + strconv.Itoa(i)
		s, ok := c.Services[name]
		if !ok {
			t.Errorf("service %s missing", name)
			continue
		}
		t.Run(name, func(t *testing.T) {
			if !strings.Contains(s.Image, "shoal:dev") {
				t.Errorf("image %q: want shoal:dev (built by make docker)", s.Image)
			}
			if wantProfile := i > 3; wantProfile != slices.Contains(s.Profiles, "five") {
				t.Errorf("profiles %v: nodes 4 and 5 belong to profile five, nodes 1-3 to none", s.Profiles)
			}
			// The advertised addresses must work from the host and between nodes alike: host network.
			if s.NetworkMode != "host" || len(s.Ports) > 0 {
				t.Errorf("network_mode %q, ports %v: want the host's network and no published ports", s.NetworkMode, s.Ports)
			}
			var args []string
			for _, a := range s.Command {
				args = append(args, composeDefaults(a))
			}
			if len(args) == 0 || args[0] != "start" {
				t.Fatalf("command %v does not start a node", args)
			}
			if d, _ := flagValue(args, "data-dir"); d != "/data/"+name {
				t.Errorf("--data-dir %q, want /data/%s", d, name)
			}
			if !slices.Contains(s.Volumes, "shoal-data:/data") {
				t.Errorf("volumes %v: want shoal-data:/data", s.Volumes)
			}
			for _, f := range []string{"listen", "http", "resp"} {
				v, _ := flagValue(args, f)
				if !strings.HasPrefix(v, "127.0.0.1:") {
					t.Errorf("--%s %q: listen on the host's 127.0.0.1 only", f, v)
				}
				if prev, dup := listens[v]; dup {
					t.Errorf("--%s %s is also %s", f, v, prev)
				}
				listens[v] = name + " --" + f
			}
			listen, _ := flagValue(args, "listen")
			if adv, _ := flagValue(args, "advertise"); adv != listen {
				t.Errorf("--advertise %q, --listen %q: advertise the address clients on the host dial", adv, listen)
			}
			grpcAddr[i] = listen
			_, boot := flagValue(args, "bootstrap")
			join, joins := flagValue(args, "join")
			if i == 1 && (!boot || joins) || i > 1 && (boot || !joins) {
				t.Errorf("node1 bootstraps, the others join: got %v", args)
			}
			for _, j := range strings.Split(join, ",") {
				if j != "" && (j == listen || !slices.Contains([]string{"127.0.0.1:26257", "127.0.0.1:26258", "127.0.0.1:26259"}, j)) {
					t.Errorf("--join %q: list nodes 1-3 (the nodes without a profile), not the node itself", join)
				}
			}
			if i > 1 && s.DependsOn["node1"]["condition"] != "service_started" {
				t.Errorf("depends_on %v: want node1 with condition service_started", s.DependsOn)
			}
			if s.Health != nil {
				t.Errorf("healthcheck %v: the scratch image has no shell or curl, and shoal no health subcommand", s.Health)
			}
			checkFlags(t, args)
		})
	}
}

// k8sDocs reads every document of every YAML file in k8s/ but the kustomization.
func k8sDocs(t *testing.T) (files []string, docs []map[string]any) {
	t.Helper()
	paths, err := filepath.Glob("k8s/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		if filepath.Base(p) == "kustomization.yaml" {
			continue
		}
		files = append(files, filepath.Base(p))
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for {
			var d map[string]any
			if err := dec.Decode(&d); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			if d != nil {
				docs = append(docs, d)
			}
		}
	}
	return files, docs
}

// as converts a decoded document into a typed view of the fields the test reads.
func as[T any](t *testing.T, d map[string]any) T {
	t.Helper()
	var v T
	b, err := yaml.Marshal(d)
	if err == nil {
		err = yaml.Unmarshal(b, &v)
	}
	if err != nil {
		t.Fatal(err)
	}
	return v
}

type meta struct {
	Name   string            `yaml:"name"`
	Labels map[string]string `yaml:"labels"`
}

type probe struct {
	HTTPGet struct {
		Path   string `yaml:"path"`
		Port   string `yaml:"port"`
		Scheme string `yaml:"scheme"`
	} `yaml:"httpGet"`
}

type execHook struct {
	Exec struct {
		Command []string `yaml:"command"`
	} `yaml:"exec"`
}

type statefulSet struct {
	Metadata meta `yaml:"metadata"`
	Spec     struct {
		ServiceName string `yaml:"serviceName"`
		Replicas    int    `yaml:"replicas"`
		PodPolicy   string `yaml:"podManagementPolicy"`
		Selector    struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata struct {
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"metadata"`
			Spec struct {
				TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
				TopologySpreadConstraints     []struct {
					TopologyKey string `yaml:"topologyKey"`
				} `yaml:"topologySpreadConstraints"`
				Containers []struct {
					Image     string   `yaml:"image"`
					Args      []string `yaml:"args"`
					Lifecycle struct {
						PreStop   *execHook `yaml:"preStop"`
						PostStart *execHook `yaml:"postStart"`
					} `yaml:"lifecycle"`
					Env []struct {
						Name string `yaml:"name"`
					} `yaml:"env"`
					Ports []struct {
						Name          string `yaml:"name"`
						ContainerPort int    `yaml:"containerPort"`
					} `yaml:"ports"`
					StartupProbe   *probe `yaml:"startupProbe"`
					ReadinessProbe *probe `yaml:"readinessProbe"`
					LivenessProbe  *probe `yaml:"livenessProbe"`
					VolumeMounts   []struct {
						Name      string `yaml:"name"`
						MountPath string `yaml:"mountPath"`
					} `yaml:"volumeMounts"`
				} `yaml:"containers"`
				Volumes []struct {
					Name   string `yaml:"name"`
					Secret struct {
						SecretName string `yaml:"secretName"`
					} `yaml:"secret"`
				} `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
		VolumeClaimTemplates []struct {
			Metadata meta `yaml:"metadata"`
		} `yaml:"volumeClaimTemplates"`
	} `yaml:"spec"`
}

func subset(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func TestKubernetes(t *testing.T) {
	files, docs := k8sDocs(t)
	kb, err := os.ReadFile("k8s/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var kust struct {
		Resources []string `yaml:"resources"`
	}
	if err := yaml.Unmarshal(kb, &kust); err != nil {
		t.Fatal(err)
	}
	if slices.Sort(kust.Resources); !slices.Equal(kust.Resources, files) {
		t.Errorf("kustomization resources %v, files %v", kust.Resources, files)
	}
	checkManifests(t, docs, false)
}

// TestKubernetesSecure renders the overlay with the token and TLS (kubectl kustomize, when kubectl is
// installed) and checks the wiring: flags, Secret volumes mounted where the flags point, probes and
// scrapes over HTTPS.
func TestKubernetesSecure(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed: the k8s-secure overlay is not rendered")
	}
	out, err := exec.Command(kubectl, "kustomize", "k8s-secure").Output()
	if err != nil {
		t.Fatalf("kubectl kustomize k8s-secure: %v", err)
	}
	var docs []map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(out))
	for {
		var d map[string]any
		if err := dec.Decode(&d); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, d)
	}
	checkManifests(t, docs, true)
}

// checkManifests checks the Services, StatefulSet and PodDisruptionBudget of one rendering.
func checkManifests(t *testing.T, docs []map[string]any, secure bool) {
	var headless string
	var sets []statefulSet
	var pdbSelector map[string]string
	servicePorts := map[string][]string{}
	for _, d := range docs {
		switch d["kind"] {
		case "Service":
			s := as[struct {
				Metadata meta `yaml:"metadata"`
				Spec     struct {
					ClusterIP  string `yaml:"clusterIP"`
					PublishNRA bool   `yaml:"publishNotReadyAddresses"`
					Ports      []struct {
						Name string `yaml:"name"`
					} `yaml:"ports"`
				} `yaml:"spec"`
			}](t, d)
			for _, p := range s.Spec.Ports {
				servicePorts[s.Metadata.Name] = append(servicePorts[s.Metadata.Name], p.Name)
			}
			if s.Spec.ClusterIP == "None" {
				headless = s.Metadata.Name
				if !s.Spec.PublishNRA {
					t.Errorf("headless service %s: peers must resolve nodes that are not ready yet (publishNotReadyAddresses)", headless)
				}
			}
		case "StatefulSet":
			sets = append(sets, as[statefulSet](t, d))
		case "PodDisruptionBudget":
			p := as[struct {
				APIVersion string `yaml:"apiVersion"`
				Spec       struct {
					MaxUnavailable int `yaml:"maxUnavailable"`
					Selector       struct {
						MatchLabels map[string]string `yaml:"matchLabels"`
					} `yaml:"selector"`
				} `yaml:"spec"`
			}](t, d)
			if p.APIVersion != "policy/v1" || p.Spec.MaxUnavailable != 1 {
				t.Errorf("PodDisruptionBudget %s maxUnavailable %d: want policy/v1 and 1", p.APIVersion, p.Spec.MaxUnavailable)
			}
			pdbSelector = p.Spec.Selector.MatchLabels
		}
	}
	if headless == "" || len(sets) != 1 || pdbSelector == nil {
		t.Fatalf("want a headless Service, one StatefulSet and a PodDisruptionBudget; got service %q, %d sets, pdb selector %v", headless, len(sets), pdbSelector)
	}
	for name, ports := range servicePorts {
		slices.Sort(ports)
		if !slices.Equal(ports, []string{"grpc", "http", "resp"}) {
			t.Errorf("service %s ports %v: want grpc, http and resp", name, ports)
		}
	}

	s := sets[0]
	spec := s.Spec.Template.Spec
	labels := s.Spec.Template.Metadata.Labels
	if s.Spec.Replicas != 3 {
		t.Errorf("%d replicas, want 3", s.Spec.Replicas)
	}
	if s.Spec.PodPolicy != "Parallel" {
		t.Errorf("podManagementPolicy %q: the pods must start together to wait for init together", s.Spec.PodPolicy)
	}
	if s.Spec.ServiceName != headless {
		t.Errorf("serviceName %q, headless service %q", s.Spec.ServiceName, headless)
	}
	if !subset(s.Spec.Selector.MatchLabels, labels) || !subset(pdbSelector, labels) {
		t.Errorf("pod labels %v: not selected by the set (%v) or the PDB (%v)", labels, s.Spec.Selector.MatchLabels, pdbSelector)
	}
	if spec.TerminationGracePeriodSeconds < 30 {
		t.Errorf("terminationGracePeriodSeconds %d: leave time to hand leaderships over", spec.TerminationGracePeriodSeconds)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers", len(spec.Containers))
	}
	c := spec.Containers[0]
	ports := map[string]int{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	for flag, port := range map[string]string{"listen": "grpc", "http": "http", "resp": "resp"} {
		if v, _ := flagValue(c.Args, flag); ports[port] == 0 || !strings.HasSuffix(v, ":"+strconv.Itoa(ports[port])) {
			t.Errorf("--%s %q does not listen on the container port named %s (%d)", flag, v, port, ports[port])
		}
	}
	ann := s.Spec.Template.Metadata.Annotations
	wantScheme := ""
	if secure {
		wantScheme = "https"
	}
	if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/port"] != strconv.Itoa(ports["http"]) || ann["prometheus.io/path"] != "/metrics" || ann["prometheus.io/scheme"] != wantScheme {
		t.Errorf("annotations %v: want Prometheus to scrape /metrics on the http port (scheme %q)", ann, wantScheme)
	}
	// Ready once serving; alive while waiting for init or joining (never restarted for that).
	for name, p := range map[string]*probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		wantPath := "/metrics"
		if name == "readiness" {
			wantPath = "/healthz"
		}
		if p == nil || p.HTTPGet.Path != wantPath || p.HTTPGet.Port != "http" || strings.ToLower(p.HTTPGet.Scheme) != wantScheme && !(wantScheme == "" && p.HTTPGet.Scheme == "http") {
			t.Errorf("%s probe %+v: want httpGet %s on port http (scheme %q)", name, p, wantPath, wantScheme)
		}
	}
	dataDir, _ := flagValue(c.Args, "data-dir")
	mounted := func(path string, volume func(name string) bool) bool {
		for _, vm := range c.VolumeMounts {
			if volume(vm.Name) && strings.HasPrefix(path, vm.MountPath+"/") {
				return true
			}
		}
		return false
	}
	if !mounted(dataDir, func(n string) bool {
		return slices.ContainsFunc(s.Spec.VolumeClaimTemplates, func(v struct {
			Metadata meta `yaml:"metadata"`
		}) bool {
			return v.Metadata.Name == n
		})
	}) {
		t.Errorf("--data-dir %q is not on a volume claim template", dataDir)
	}
	secretVolume := func(secret string) func(string) bool {
		return func(n string) bool {
			for _, v := range spec.Volumes {
				if v.Name == n && v.Secret.SecretName == secret {
					return true
				}
			}
			return false
		}
	}
	certs, hasCerts := flagValue(c.Args, "certs-dir")
	tokenFile, hasToken := flagValue(c.Args, "auth-token-file")
	if hasCerts != secure || hasToken != secure {
		t.Errorf("--certs-dir %q, --auth-token-file %q: want both in the secure overlay only", certs, tokenFile)
	}
	if secure && (!mounted(certs+"/ca.crt", secretVolume("shoal-certs")) || !mounted(tokenFile, secretVolume("shoal-token"))) {
		t.Errorf("--certs-dir %s and --auth-token-file %s must be on the Secrets shoal-certs and shoal-token (volumes %+v, mounts %+v)",
			certs, tokenFile, spec.Volumes, c.VolumeMounts)
	}

	checkHooks(t, c.Lifecycle.PreStop, c.Lifecycle.PostStart, spec.TerminationGracePeriodSeconds, ports["grpc"], c.Args)
	if !slices.ContainsFunc(spec.TopologySpreadConstraints, func(c struct {
		TopologyKey string `yaml:"topologyKey"`
	}) bool {
		return c.TopologyKey == "topology.kubernetes.io/zone"
	}) {
		t.Errorf("topologySpreadConstraints %+v: want the pods spread over zones", spec.TopologySpreadConstraints)
	}

	// $(VAR) references must name env vars of the container (Kubernetes leaves others as is).
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = "x"
	}
	podName := s.Metadata.Name + "-0"
	env["POD_NAME"], env["POD_NAMESPACE"] = podName, "default"
	var args []string
	for _, a := range c.Args {
		a = regexp.MustCompile(`\$\((\w+)\)`).ReplaceAllStringFunc(a, func(m string) string {
			v, ok := env[m[2:len(m)-1]]
			if !ok {
				t.Errorf("argument %q refers to an undefined variable %s", a, m)
			}
			return v
		})
		args = append(args, a)
	}
	if adv, _ := flagValue(args, "advertise"); !strings.HasPrefix(adv, podName+"."+headless+".") {
		t.Errorf("--advertise %q is not the pod's stable DNS name under service %s", adv, headless)
	}
	// One pod template for every pod: nobody bootstraps, every pod joins the first three (itself
	// included), and `shoal init` creates the cluster.
	if _, boot := flagValue(args, "bootstrap"); boot {
		t.Errorf("--bootstrap in a pod template: every pod would create its own cluster; use shoal init")
	}
	join, _ := flagValue(args, "join")
	var want []string
	for i := range 3 {
		want = append(want, fmt.Sprintf("%s-%d.%s.default.svc:%d", s.Metadata.Name, i, headless, ports["grpc"]))
	}
	if join != strings.Join(want, ",") {
		t.Errorf("--join %q, want %q", join, strings.Join(want, ","))
	}
	if secure {
		// The flag check reads the token file: point it at a local one.
		dir := t.TempDir()
		if err := os.WriteFile(dir+"/token", []byte("t"), 0o600); err != nil {
			t.Fatal(err)
		}
		for i, a := range args {
			if strings.HasPrefix(a, "--auth-token-file=") {
				args[i] = "--auth-token-file=" + dir + "/token"
			}
		}
	}
	checkFlags(t, args)
}

// checkHooks checks the lifecycle hooks: shoal node prestop and poststart against this node over
// loopback, prestop's --grace within the termination grace period with room for the shutdown, and
// the node's TLS and token flags, when it has them, on both.
func checkHooks(t *testing.T, pre, post *execHook, graceSeconds, grpcPort int, args []string) {
	t.Helper()
	for _, h := range []struct {
		name string
		hook *execHook
	}{{"prestop", pre}, {"poststart", post}} {
		if h.hook == nil {
			t.Errorf("no %s hook", h.name)
			continue
		}
		cmd := h.hook.Exec.Command
		if len(cmd) < 3 || cmd[0] != "/shoal" || cmd[1] != "node" || cmd[2] != h.name {
			t.Errorf("%s hook %q: want /shoal node %s", h.name, cmd, h.name)
			continue
		}
		if host, _ := flagValue(cmd, "host"); host != "127.0.0.1:"+strconv.Itoa(grpcPort) {
			t.Errorf("%s hook --host %q: want this node over loopback, 127.0.0.1:%d", h.name, host, grpcPort)
		}
		for _, f := range []string{"certs-dir", "auth-token-file"} {
			if want, _ := flagValue(args, f); want != "" {
				if got, _ := flagValue(cmd, f); got != want {
					t.Errorf("%s hook --%s %q: want the node's %q", h.name, f, got, want)
				}
			}
		}
	}
	if pre == nil {
		return
	}
	g, _ := flagValue(pre.Exec.Command, "grace")
	grace, err := time.ParseDuration(g)
	// The shutdown after the hook hands over what is left for up to 5 s, then closes the store.
	if err != nil || grace <= 0 || grace+15*time.Second > time.Duration(graceSeconds)*time.Second {
		t.Errorf("prestop --grace %q: want a duration that leaves 15s of the %ds termination grace period to the shutdown", g, graceSeconds)
	}
}
