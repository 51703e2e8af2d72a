// Present so that cargo unifies the hack's build-dependencies with the workspace's too.
fn main() {}
