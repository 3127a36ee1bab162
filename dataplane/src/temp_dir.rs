//! Private temporary directories: the demo's capture and the benchmarks' scratch files go
//! in a directory made anew with a name no one can guess (`mkdtemp`, mode 0700), never in
//! one that exists already, which another user of a shared `/tmp` could have made (and
//! then read, replace or point elsewhere what is written there).

use std::path::PathBuf;

/// A new directory `PREFIX-XXXXXX` under the system's temporary directory (`TMPDIR`,
/// else `/tmp`), readable by this user alone.
pub fn private_temp_dir(prefix: &str) -> std::io::Result<PathBuf> {
    let base = std::env::temp_dir();
    let template = base.join(format!("{prefix}-XXXXXX"));
    let mut bytes = template.into_os_string().into_encoded_bytes();
    bytes.push(0);
    // SAFETY: a NUL-terminated template ending in six X, which mkdtemp rewrites in place.
    let made = unsafe { libc::mkdtemp(bytes.as_mut_ptr().cast()) };
    if made.is_null() {
        let e = std::io::Error::last_os_error();
        return Err(std::io::Error::new(
            e.kind(),
            format!(
                "cannot make a directory in {} (TMPDIR): {e}",
                base.display()
            ),
        ));
    }
    bytes.pop();
    // SAFETY: the bytes came from an OsString, with six ASCII letters or digits rewritten.
    Ok(PathBuf::from(unsafe {
        std::ffi::OsString::from_encoded_bytes_unchecked(bytes)
    }))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    /// Two directories of one prefix are two, each this user's alone.
    #[test]
    fn each_directory_is_new_and_private() {
        let a = super::private_temp_dir("pint-temp-test").unwrap();
        let b = super::private_temp_dir("pint-temp-test").unwrap();
        assert_ne!(a, b);
        for d in [&a, &b] {
            let m = std::fs::metadata(d).unwrap();
            assert!(m.is_dir());
            assert_eq!(m.permissions().mode() & 0o777, 0o700);
            let name = d.file_name().unwrap().to_str().unwrap();
            assert!(
                name.starts_with("pint-temp-test-") && name.len() == 21,
                "{name}"
            );
            std::fs::remove_dir(d).unwrap();
        }
    }
}
