// Package deploy holds no code: only the container and cluster files of Shoal. Its test checks that
// they parse and agree with each other and with the binary's flags; it starts nothing.
package deploy

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

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
	Image     string                       `yaml:"image"`
	Hostname  string                       `yaml:"hostname"`
	Command   []string                     `yaml:"command"`
	Volumes   []string                     `yaml:"volumes"`
	Ports     []string                     `yaml:"ports"`
	Profiles  []string                     `yaml:"profiles"`
	DependsOn map[string]map[string]string `yaml:"depends_on"`
	Health    any                          `yaml:"healthcheck"`
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
	for i := 1; i <= 5; i++ {
		name := "node" + string(rune('0'+i))
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
			args := s.Command
			if len(args) == 0 || args[0] != "start" {
				t.Fatalf("command %v does not start a node", args)
			}
			want := map[string]string{"data-dir": "/data", "listen": "0.0.0.0:26257", "advertise": name + ":26257", "http": "0.0.0.0:8080"}
			for f, v := range want {
				if got, _ := flagValue(args, f); got != v {
					t.Errorf("--%s = %q, want %q", f, got, v)
				}
			}
			_, boot := flagValue(args, "bootstrap")
			join, joins := flagValue(args, "join")
			if i == 1 && (!boot || joins) || i > 1 && (boot || join != "node1:26257") {
				t.Errorf("node1 bootstraps, the others join node1:26257: got %v", args)
			}
			if i > 1 && s.DependsOn["node1"]["condition"] != "service_started" {
				t.Errorf("depends_on %v: want node1 with condition service_started", s.DependsOn)
			}
			vol := name + "-data"
			if !slices.Contains(s.Volumes, vol+":/data") {
				t.Errorf("volumes %v: want %s:/data", s.Volumes, vol)
			}
			if _, ok := c.Volumes[vol]; !ok {
				t.Errorf("volume %s is not declared", vol)
			}
			for _, p := range s.Ports {
				if !strings.HasPrefix(p, "127.0.0.1:") {
					t.Errorf("port %q is published beyond 127.0.0.1", p)
				}
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
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
}

type statefulSet struct {
	Metadata meta `yaml:"metadata"`
	Spec     struct {
		ServiceName string `yaml:"serviceName"`
		Replicas    int    `yaml:"replicas"`
		Selector    struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata meta `yaml:"metadata"`
			Spec     struct {
				TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
				Containers                    []struct {
					Image string   `yaml:"image"`
					Args  []string `yaml:"args"`
					Env   []struct {
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

	var headless string
	var sets []statefulSet
	var pdbSelector map[string]string
	for _, d := range docs {
		switch d["kind"] {
		case "Service":
			s := as[struct {
				Metadata meta `yaml:"metadata"`
				Spec     struct {
					ClusterIP  string `yaml:"clusterIP"`
					PublishNRA bool   `yaml:"publishNotReadyAddresses"`
				} `yaml:"spec"`
			}](t, d)
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
	if headless == "" || len(sets) == 0 || pdbSelector == nil {
		t.Fatalf("want a headless Service, StatefulSets and a PodDisruptionBudget; got service %q, %d sets, pdb selector %v", headless, len(sets), pdbSelector)
	}

	total, bootstrappers := 0, 0
	for _, s := range sets {
		t.Run(s.Metadata.Name, func(t *testing.T) {
			total += s.Spec.Replicas
			spec := s.Spec.Template.Spec
			labels := s.Spec.Template.Metadata.Labels
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
			httpPort := 0
			for _, p := range c.Ports {
				if p.Name == "http" {
					httpPort = p.ContainerPort
				}
			}
			if h, _ := flagValue(c.Args, "http"); httpPort == 0 || !strings.HasSuffix(h, ":"+strconv.Itoa(httpPort)) {
				t.Errorf("--http %q does not listen on the container port named http (%d)", h, httpPort)
			}
			for name, p := range map[string]*probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
				if p == nil || p.HTTPGet.Path != "/healthz" || p.HTTPGet.Port != "http" {
					t.Errorf("%s probe %+v: want httpGet /healthz on port http", name, p)
				}
			}
			dataDir, _ := flagValue(c.Args, "data-dir")
			mounted := false
			for _, vm := range c.VolumeMounts {
				for _, vct := range s.Spec.VolumeClaimTemplates {
					if vm.Name == vct.Metadata.Name && strings.HasPrefix(dataDir, vm.MountPath) {
						mounted = true
					}
				}
			}
			if !mounted {
				t.Errorf("--data-dir %q is not on a volume claim template", dataDir)
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
			if _, boot := flagValue(args, "bootstrap"); boot {
				bootstrappers++
				if s.Spec.Replicas != 1 {
					t.Errorf("a set of %d pods bootstraps: each would create its own cluster", s.Spec.Replicas)
				}
			} else if j, _ := flagValue(args, "join"); j == "" {
				t.Errorf("neither --bootstrap nor --join: a new pod could not start")
			}
			checkFlags(t, args)
		})
	}
	if total != 3 || bootstrappers != 1 {
		t.Errorf("%d pods, %d bootstrapping sets: want 3 pods, one of which bootstraps", total, bootstrappers)
	}
}
