# SPDX-License-Identifier: Apache-2.0
# The fleet under Nomad (1.6 or later: native service discovery, Variables): a service job for
# a three-member NATS JetStream cluster and a system job for sandboxd on every client with
# meta.sandbox_host = "true". On paper: no Nomad here to validate it (deploy/README.md says what
# is checked and how the pieces fail; the Kubernetes manifests beside it say the same things
# with the reasons).
#
# Nomad takes one job per file: run each from its own copy,
#   sed -n '/^job "nats"/,/^}/p' sandboxd.nomad.hcl >nats.nomad.hcl && nomad job run nats.nomad.hcl
#   sed -n '/^job "sandboxd"/,/^}/p' sandboxd.nomad.hcl >sd.nomad.hcl && nomad job run sd.nomad.hcl
#
# Secrets are Nomad Variables at nomad/jobs/sandboxd (the job's own path, which only its tasks
# read): store_access_key, store_secret (the object store), fleet_key (at least 32 bytes, the
# same for every host; its loss makes the store's snapshots unreadable). TLS for the API is
# the balancer's or proxy's in front of the "sandboxd" service (not in this file): sandboxd
# listens in plain HTTP, as the Kubernetes manifests say why.

job "nats" {
  type = "service"

  group "nats" {
    count = 3

    # Two members on one client would both go with it, and the quorum with them.
    constraint {
      operator = "distinct_hosts"
      value    = "true"
    }

    # One member at a time, the next only once this one is healthy (its check below).
    update {
      max_parallel     = 1
      min_healthy_time = "30s"
      healthy_deadline = "10m"
    }

    # Each client holding a member declares a host volume "nats" (client config). A member is
    # named by its allocation index, which a replacement keeps, and stores under that name: a
    # client that once held another member keeps that one's store apart.
    volume "data" {
      type      = "host"
      source    = "nats"
      read_only = false
    }

    # Fixed ports on the client's address: members route to each other there, and sandboxd
    # lists them (distinct_hosts: one member per client, so no clash).
    network {
      port "client" {
        static = 4222
      }
      port "cluster" {
        static = 6222
      }
      port "monitor" {
        static = 8222
      }
    }

    service {
      name     = "nats"
      provider = "nomad"
      port     = "client"
      # Not /healthz: a member without a quorum is not cured by a restart.
      check {
        type     = "http"
        port     = "monitor"
        path     = "/healthz?js-enabled-only=true"
        interval = "10s"
        timeout  = "2s"
      }
    }

    service {
      name     = "nats-cluster"
      provider = "nomad"
      port     = "cluster"
    }

    task "nats" {
      driver = "docker"

      config {
        # The 2.9 series: the one the fleet's tests run (Debian 12's nats-server 2.9.10).
        image        = "nats:2.9-alpine"
        network_mode = "host"
        command      = "nats-server"
        args         = ["--config", "/local/nats.conf"]
      }

      # SIGUSR2 is nats-server's lame duck mode: clients move to the other members and this
      # one hands its leaderships over, then exits (checked on 2.9.10). kill_timeout is past
      # lame_duck_duration + lame_duck_grace_period.
      kill_signal  = "SIGUSR2"
      kill_timeout = "60s"

      volume_mount {
        volume      = "data"
        destination = "/data"
      }

      # The routes follow the members' registrations; a member reloads them on SIGHUP
      # rather than restarting. A first member alone renders no route and waits to be found.
      template {
        destination   = "local/nats.conf"
        change_mode   = "signal"
        change_signal = "SIGHUP"
        data          = <<-EOT
          server_name: nats-{{ env "NOMAD_ALLOC_INDEX" }}
          listen: 0.0.0.0:4222
          http: 0.0.0.0:8222
          lame_duck_duration: 30s
          lame_duck_grace_period: 10s
          jetstream {
            store_dir: /data/nats-{{ env "NOMAD_ALLOC_INDEX" }}
            max_file_store: 8GB
            max_memory_store: 256MB
          }
          cluster {
            name: sandbox-fleet
            listen: 0.0.0.0:6222
            routes: [
          {{- range nomadService "nats-cluster" }}
              nats://{{ .Address }}:{{ .Port }}
          {{- end }}
            ]
          }
        EOT
      }

      resources {
        cpu    = 500
        memory = 1024
      }
    }
  }
}

job "sandboxd" {
  type = "system"

  # Clients kept for sandboxes say so in their config (meta { sandbox_host = "true" }); they
  # need /dev/kvm, /dev/net/tun and cgroup v2, which Nomad does not fingerprint.
  constraint {
    attribute = "${meta.sandbox_host}"
    value     = "true"
  }

  # One host at a time: the others take the creates meanwhile, and the restarted sandboxd
  # adopts its own sandboxes.
  update {
    max_parallel     = 1
    min_healthy_time = "10s"
  }

  group "sandboxd" {
    network {
      port "api" {
        static = 8380
      }
      port "operator" {
        static = 8381
      }
    }

    service {
      name     = "sandboxd"
      provider = "nomad"
      port     = "api"
      # Answers once the loop runs, whatever NATS and the store do (deploy/README.md).
      check {
        type     = "http"
        port     = "operator"
        path     = "/healthz"
        interval = "5s"
        timeout  = "2s"
      }
    }

    task "sandboxd" {
      # raw_exec: the host's namespaces, cgroups and devices, as the systemd unit of
      # docs/api.md has them. A sandbox's VMM, proxy, network namespace and cgroup are the
      # host's, so they outlive this task; Nomad stops a task by its own cgroup, which the
      # sandboxes have left (client/cgroup.c) (not tried here). The clients must enable
      # raw_exec. The binaries are installed on the host (deploy/README.md, "The image").
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        # The script writes $VAR, never the braced form: in a job file ${...} is Nomad's
        # interpolation (a literal one would be written $${...}).
        args = ["-ec", <<-EOT
          # --host-id takes 1 to 63 of [A-Za-z0-9_-]: a node name's dots become '_'; a longer
          # name is refused rather than cut (two cut names could collide).
          id=$(printf %s "$NODE_NAME" | tr . _)
          if [ "$(printf %s "$id" | wc -c)" -gt 63 ]; then
            echo "sandboxd: node name $NODE_NAME is over 63 characters: give --host-id" >&2
            exit 2
          fi
          # Plain HTTP: a host sends a call for a box it does not hold to the owner's
          # advertised address over plain HTTP and WebSocket (sandboxd/dp_proxy.c).
          exec /usr/local/bin/sandboxd serve \
            --listen "$NODE_IP:8380" --insecure-http \
            --public-url "$PUBLIC_URL" \
            --operator "$NODE_IP:8381" \
            --fleet "$FLEET_URLS" --host-id "$id" --fleet-pool default \
            --slots 8 --fleet-replicas 3 \
            --advertise "$NODE_IP:8380" \
            --store-endpoint "$STORE_ENDPOINT" --store-bucket "$STORE_BUCKET" \
            --store-region "$STORE_REGION" \
            --store-credentials "$NOMAD_SECRETS_DIR/store-credentials" \
            --fleet-key "$NOMAD_SECRETS_DIR/fleet.key"
        EOT
        ]
      }

      # SIGTERM closes every WebSocket with 1001 and sandboxd exits; the sandboxes go on.
      kill_timeout = "15s"

      env {
        NODE_NAME    = "${node.unique.name}"
        NODE_IP      = "${attr.unique.network.ip-address}"
        SANDBOX_HOME = "/var/lib/sandbox"
        # v2 and nothing else: "auto" would run sandboxes without limits where the hierarchy
        # is not usable.
        SANDBOX_CGROUP = "v2"
        PUBLIC_URL     = "https://sandboxes.example.com"
        # The object store; the --store-* and --fleet-key flags are those docs/fleet.md gives
        # ("The service in a fleet"), not final.
        STORE_ENDPOINT = "https://s3.example.com"
        STORE_BUCKET   = "sandbox-snapshots"
        STORE_REGION   = "us-east-1"
      }

      # Every NATS member: a client that knows one only cannot start while that one is away.
      # A change needs no restart: the members tell connected clients of each other.
      template {
        destination = "local/fleet.env"
        env         = true
        change_mode = "noop"
        data        = <<-EOT
          FLEET_URLS={{ range $i, $s := nomadService "nats" }}{{ if $i }},{{ end }}nats://{{ $s.Address }}:{{ $s.Port }}{{ end }}
        EOT
      }

      # A placeholder or an empty Variable makes sandboxd refuse to start, never run with it.
      template {
        destination = "secrets/store-credentials"
        perms       = "0400"
        change_mode = "restart"
        data        = <<-EOT
          {{ with nomadVar "nomad/jobs/sandboxd" }}{{ .store_access_key }}
          {{ .store_secret }}{{ end }}
        EOT
      }

      template {
        destination = "secrets/fleet.key"
        perms       = "0400"
        change_mode = "restart"
        data        = "{{ with nomadVar \"nomad/jobs/sandboxd\" }}{{ .fleet_key }}{{ end }}"
      }

      # sandboxd's own share; the sandboxes' memory is in their own cgroups, which Nomad does
      # not count: keep these clients for sandboxes and size --slots for the machine.
      resources {
        cpu    = 500
        memory = 512
      }
    }
  }
}
