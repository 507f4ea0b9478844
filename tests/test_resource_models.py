"""The network and disk models without HTTP: names, lookups by id or name, membership and
mounts that follow the sandbox, buckets that outlive registrations, and mount resolution."""

from __future__ import annotations

import pytest

from fake_server import FakeCreateOS, ServerConfig
from fake_server.disks import DiskCredentials, DiskSpec, MountRequest, check_mount_path
from fake_server.errors import ApiError
from fake_server.filesystem import FileSystem
from fake_server.lifecycle import Status
from fake_server.namespace import locate
from fake_server.registry import check_name
from fake_server.sandbox import Sandbox
from fake_server.sandboxes import CreateSpec
from fake_server.tenants import Tenant

SECRET = "s3cr3t-never-shown"


def _spec(name: str = "data", bucket: str = "bucket-1") -> DiskSpec:
    return DiskSpec.parse(
        name=name,
        kind="s3",
        config={"bucket": bucket, "endpoint": "https://s3.example"},
        credentials={"access_key": "AKIA", "secret_key": SECRET},
    )


@pytest.fixture
def fake() -> FakeCreateOS:
    return FakeCreateOS(ServerConfig(seed=3, transition_ms=0))


@pytest.fixture
def tenant(fake: FakeCreateOS) -> Tenant:
    return fake.tenant(fake.create_tenant())


def _sandbox(fake: FakeCreateOS, tenant: Tenant) -> Sandbox:
    sandbox = fake.sandboxes.create(tenant, CreateSpec(shape="s-1vcpu-1gb"))
    assert sandbox.status is Status.RUNNING
    return sandbox


def _refused(status: int, call: object, *args: object, **kwargs: object) -> ApiError:
    with pytest.raises(ApiError) as caught:
        call(*args, **kwargs)  # type: ignore[operator]
    assert caught.value.status == status, caught.value.message
    return caught.value


def test_names_follow_the_rule() -> None:
    assert check_name("a") == "a"
    assert check_name("x" * 63) == "x" * 63
    for bad in ("", "-a", "A", "a_b", "x" * 64, "a b", "é"):
        assert "name" in (_refused(400, check_name, bad).data or {})
    assert "required" in _refused(400, check_name, None).message


def test_networks_by_id_or_name_and_duplicate_names(fake: FakeCreateOS, tenant: Tenant) -> None:
    net = tenant.networks.create(fake.ids, fake.clock.wall(), "backend")
    assert net.id.startswith("net_")
    assert tenant.networks.get("backend") is tenant.networks.get(net.id) is net
    assert _refused(409, tenant.networks.create, fake.ids, fake.clock.wall(), "backend")
    # No name can be an id (ids hold "_"), so a lookup by either is never ambiguous.
    _refused(400, tenant.networks.check_new_name, net.id)
    _refused(404, tenant.networks.get, "nope")


def test_membership_follows_the_sandbox(fake: FakeCreateOS, tenant: Tenant) -> None:
    net = tenant.networks.create(fake.ids, fake.clock.wall(), "backend")
    first, second = _sandbox(fake, tenant), _sandbox(fake, tenant)
    tenant.networks.attach("backend", first)
    tenant.networks.attach(net.id, second)
    tenant.networks.attach(net.id, second)  # joining twice is harmless
    view = net.view(members=True)
    assert view["member_count"] == 2
    assert [m["sandbox_id"] for m in view["members"]] == [first.id, second.id]
    assert view["members"][0] == {
        "sandbox_id": first.id,
        "status": "running",
        "name": first.name,
        "ip": first.ip,
    }
    assert "members" not in net.view(members=False)
    _refused(409, tenant.networks.delete, "backend")
    tenant.networks.detach("backend", first)
    _refused(404, tenant.networks.detach, "backend", first)  # not a member any more
    fake.sandboxes.delete(second)  # transition_ms=0: destroyed at once
    assert second.status is Status.DESTROYED
    assert net.members == {}
    # A destroyed sandbox cannot join again.
    _refused(409, tenant.networks.attach, "backend", second)
    tenant.networks.delete("backend")
    _refused(404, tenant.networks.get, net.id)


def test_disk_spec_checks_every_field() -> None:
    good_config = {"bucket": "b", "endpoint": "https://s3.example"}
    good_credentials = {"access_key": "a", "secret_key": "s"}
    cases = [
        ({"kind": "gcs"}, "kind"),
        ({"config": None}, "config"),
        ({"config": {"bucket": "b"}}, "config.endpoint"),
        ({"config": {**good_config, "bucket": ""}}, "config.bucket"),
        ({"config": {**good_config, "use_path_style": "yes"}}, "config.use_path_style"),
        ({"config": {**good_config, "extra": 1}}, "config.extra"),
        ({"credentials": None}, "credentials"),
        ({"credentials": {"access_key": "a"}}, "credentials.secret_key"),
        ({"credentials": {**good_credentials, "token": "t"}}, "credentials.token"),
    ]
    for change, field in cases:
        fields: dict[str, object] = {
            "name": "d",
            "kind": "s3",
            "config": good_config,
            "credentials": good_credentials,
            **change,
        }
        error = _refused(400, DiskSpec.parse, **fields)
        assert field in (error.data or {}), (change, error.data)
    spec = DiskSpec.parse(
        name="d",
        kind=None,
        config={**good_config, "region": "", "use_path_style": True},
        credentials=good_credentials,
    )
    assert spec.config == {**good_config, "use_path_style": True}


def test_credentials_never_show(fake: FakeCreateOS, tenant: Tenant) -> None:
    disk = tenant.disks.create(fake.ids, fake.clock.wall(), _spec())
    assert SECRET not in repr(disk) + repr(disk.credentials) + str(disk.view())
    tenant.disks.rotate_credentials("data", DiskCredentials("AKIA2", "other"))
    assert disk.credentials.secret_key == "other"


def test_mount_paths() -> None:
    assert check_mount_path("/mnt//data/./") == "/mnt/data"
    for bad in ("", "mnt", "/", "/bin", "/usr/bin/x", "/dev", "/mnt/\x00"):
        assert "mount_path" in (_refused(400, check_mount_path, bad).data or {})
    assert check_mount_path("/binaries") == "/binaries"  # only /bin itself and below


def test_attach_needs_a_running_sandbox_and_a_free_path(fake: FakeCreateOS, tenant: Tenant) -> None:
    tenant.disks.create(fake.ids, fake.clock.wall(), _spec())
    tenant.disks.create(fake.ids, fake.clock.wall(), _spec("other", "bucket-2"))
    sandbox = _sandbox(fake, tenant)
    attachment = tenant.disks.attach(sandbox, MountRequest("data", "/mnt/data"))
    assert attachment.view()["mount_status"] == "mounted"
    assert sandbox.fs.is_dir("/mnt/data")  # the mount point exists
    _refused(409, tenant.disks.attach, sandbox, MountRequest("other", "/mnt/data"))
    _refused(409, tenant.disks.attach, sandbox, MountRequest("other", "/mnt/data/inner"))
    _refused(409, tenant.disks.attach, sandbox, MountRequest("other", "/mnt"))
    _refused(400, tenant.disks.attach, sandbox, MountRequest("other", "/srv", "sub"))
    sandbox.fs.write("/srv/file", b"x", make_parents=True)
    _refused(400, tenant.disks.attach, sandbox, MountRequest("other", "/srv/file"))  # a file
    tenant.disks.attach(sandbox, MountRequest("other", "/mnt/other"))
    fake.sandboxes.pause(sandbox)
    assert sandbox.status is Status.PAUSED
    error = _refused(409, tenant.disks.attach, sandbox, MountRequest("other", "/mnt/again"))
    assert "paused" in error.message


def test_detach_and_delete(fake: FakeCreateOS, tenant: Tenant) -> None:
    disk = tenant.disks.create(fake.ids, fake.clock.wall(), _spec())
    sandbox = _sandbox(fake, tenant)
    tenant.disks.attach(sandbox, MountRequest(disk.id, "/a"))
    tenant.disks.attach(sandbox, MountRequest("data", "/b"))  # one disk at two paths
    _refused(409, tenant.disks.delete, "data")
    assert tenant.disks.detach(sandbox, "data", "/a") is True
    assert tenant.disks.detach(sandbox, "data", "/a") is False
    assert [a.mount_path for a in tenant.disks.attached_to(sandbox)] == ["/b"]
    assert tenant.disks.detach(sandbox, "data", "") is True  # everywhere
    assert tenant.disks.attached_to(sandbox) == []
    _refused(404, tenant.disks.detach, sandbox, "nope", "")
    tenant.disks.delete("data")
    _refused(404, tenant.disks.get, "data")


def test_an_ended_sandbox_unmounts_and_the_bucket_outlives_everything(
    fake: FakeCreateOS, tenant: Tenant
) -> None:
    disk = tenant.disks.create(fake.ids, fake.clock.wall(), _spec())
    sandbox = _sandbox(fake, tenant)
    tenant.disks.attach(sandbox, MountRequest("data", "/mnt/data"))
    [(mounted_at, tree)] = tenant.disks.mounts(sandbox)
    assert mounted_at == "/mnt/data"
    tree.write("/kept.txt", b"kept")
    fake.sandboxes.delete(sandbox)
    assert tenant.disks.mounts(sandbox) == []
    tenant.disks.delete(disk.id)  # nothing attached any more
    again = tenant.disks.create(fake.ids, fake.clock.wall(), _spec("again"))
    assert tenant.disks.files(again).read("/kept.txt") == b"kept"  # the same bucket
    other_bucket = tenant.disks.create(fake.ids, fake.clock.wall(), _spec("b2", "bucket-2"))
    assert tenant.disks.files(other_bucket).listdir("/") == []


def test_a_bucket_tree_is_empty_and_survives_going_cold() -> None:
    tree = FileSystem(image=False)
    assert tree.listdir("/") == []
    tree.write("/dev/not-a-device", b"data", make_parents=True)
    assert tree.freeze()
    assert tree.listdir("/") == ["dev"]
    assert tree.read("/dev/not-a-device") == b"data"
    assert tree.clone().listdir("/") == ["dev"]


def test_locate_picks_the_deepest_mount() -> None:
    root, outer, inner = FileSystem(), FileSystem(image=False), FileSystem(image=False)
    mounts = [("/mnt", outer), ("/mnt/in", inner)]
    assert locate(root, mounts, "/mnt/in/x") == (inner, "/x")
    assert locate(root, mounts, "/mnt/inx") == (outer, "/inx")
    assert locate(root, mounts, "/mnt") == (outer, "/")
    assert locate(root, mounts, "/etc/hosts") == (root, "/etc/hosts")


def test_mount_requests_and_network_refs_are_checked() -> None:
    from fake_server.networks import parse_refs

    assert parse_refs([{"id": "a"}, {"id": "net_x"}]) == ["a", "net_x"]
    for bad in ({"id": "a"}, [{"id": ""}], [{"name": "a"}], ["a"], [{"id": 1}]):
        _refused(400, parse_refs, bad)
    assert MountRequest.parse_list([]) == []
    for bad_list in (
        {"disk_id": "d"},
        [{"mount_path": "/m"}],
        [{"disk_id": "d", "mount_path": 5}],
        [{"disk_id": "d", "extra": 1}],
        ["d"],
    ):
        _refused(400, MountRequest.parse_list, bad_list)


def test_a_create_that_names_networks_and_disks_checks_them_all_first(
    fake: FakeCreateOS, tenant: Tenant
) -> None:
    net = tenant.networks.create(fake.ids, fake.clock.wall(), "backend")
    tenant.disks.create(fake.ids, fake.clock.wall(), _spec())
    wanted = [MountRequest("data", "/mnt/data")]

    def create(**fields: object) -> Sandbox:
        spec = CreateSpec(shape="s-1vcpu-1gb", **fields)  # type: ignore[arg-type]
        return fake.sandboxes.create(tenant, spec)

    before = len(tenant.sandboxes)
    _refused(404, create, networks=["backend", "missing"], disks=wanted)
    _refused(404, create, networks=["backend"], disks=[MountRequest("missing", "/m")])
    _refused(409, create, disks=[*wanted, MountRequest("data", "/mnt/data/x")])
    _refused(400, create, disks=[MountRequest("data", "/etc/hosts")])  # a file in the image
    assert len(tenant.sandboxes) == before
    assert net.members == {}
    sandbox = create(networks=[net.id], disks=wanted)
    assert list(net.members) == [sandbox.id]
    assert [a.mount_path for a in tenant.disks.attached_to(sandbox)] == ["/mnt/data"]
