//! Post-processing of NVRTC's cubins: a floor on a kernel's register
//! allocation.
//!
//! The number of registers the driver allocates per thread is the kernel's
//! `EIATTR_REGCOUNT` attribute (the `.nv.info` section of the cubin, an
//! ELF64 file), which ptxas sets to what the code needs. Raising it changes
//! nothing in the code; it only reserves more of the register file per
//! block, so fewer blocks are resident on an SM. For a streaming kernel
//! that is the one way to cap residency without side effects: shared memory
//! would cap it only by taking the L1 that holds the loads in flight (and
//! the driver enlarges the carveout to restore occupancy), and a
//! persistent grid loses the one-pass block turnover
//! (`docs/perf-notes/experiments/residency.py` measures all three).
//!
//! Layout used (ELF64, little-endian): section headers at `e_shoff`; the
//! kernel's symbol in `.symtab` (names in the linked string table); in the
//! global `.nv.info` section, entries of `format: u8, attribute: u8`
//! followed by, per format, nothing (0x01), one byte (0x02), a u16 (0x03)
//! or a u16 size and that many bytes (0x04). `EIATTR_REGCOUNT` (0x2f,
//! format 0x04) holds `symbol index: u32, registers: u32`.

use baracuda_kernels_types::{Error, Result};

const EIATTR_REGCOUNT: u8 = 0x2f;
const EIFMT_NVAL: u8 = 0x01;
const EIFMT_BVAL: u8 = 0x02;
const EIFMT_HVAL: u8 = 0x03;
const EIFMT_SVAL: u8 = 0x04;
/// The most registers a thread can have (sm_50 and later).
pub(crate) const MAX_REGISTERS_PER_THREAD: u32 = 255;

/// ELF section type of a section without file contents.
const SHT_NOBITS: u32 = 8;

#[derive(Copy, Clone, Debug)]
struct Section {
    name: u32,
    offset: usize,
    size: usize,
    link: u32,
}

struct Elf<'a> {
    data: &'a [u8],
    sections: Vec<Section>,
    names: Section,
}

fn bad(module: &str, what: impl Into<String>) -> Error {
    Error::Cubin {
        module: module.to_string(),
        what: what.into(),
    }
}

fn read<const W: usize>(data: &[u8], at: usize) -> Option<[u8; W]> {
    data.get(at..at.checked_add(W)?)?.try_into().ok()
}
fn u16_at(data: &[u8], at: usize) -> Option<u16> {
    read::<2>(data, at).map(u16::from_le_bytes)
}
fn u32_at(data: &[u8], at: usize) -> Option<u32> {
    read::<4>(data, at).map(u32::from_le_bytes)
}
fn u64_at(data: &[u8], at: usize) -> Option<u64> {
    read::<8>(data, at).map(u64::from_le_bytes)
}

impl<'a> Elf<'a> {
    fn parse(data: &'a [u8], module: &str) -> Result<Self> {
        if data.get(..6) != Some(b"\x7fELF\x02\x01".as_slice()) {
            return Err(bad(module, "not a little-endian ELF64 cubin"));
        }
        let header = || -> Option<(usize, usize, usize, usize)> {
            Some((
                usize::try_from(u64_at(data, 0x28)?).ok()?,
                u16_at(data, 0x3a)? as usize,
                u16_at(data, 0x3c)? as usize,
                u16_at(data, 0x3e)? as usize,
            ))
        };
        let (shoff, entsize, count, strndx) =
            header().ok_or_else(|| bad(module, "truncated ELF header"))?;
        if entsize < 64 || strndx >= count {
            return Err(bad(module, "malformed section header table"));
        }
        let mut sections = Vec::with_capacity(count);
        for i in 0..count {
            let at = i
                .checked_mul(entsize)
                .and_then(|o| o.checked_add(shoff))
                .ok_or_else(|| bad(module, "section header offset overflows"))?;
            let s = (|| {
                // A NOBITS section (.bss, .nv.shared.*: static shared
                // memory) has a size but occupies no bytes of the file.
                let in_file = u32_at(data, at + 4)? != SHT_NOBITS;
                Some(Section {
                    name: u32_at(data, at)?,
                    offset: usize::try_from(u64_at(data, at + 24)?).ok()?,
                    size: if in_file {
                        usize::try_from(u64_at(data, at + 32)?).ok()?
                    } else {
                        0
                    },
                    link: u32_at(data, at + 40)?,
                })
            })()
            .ok_or_else(|| bad(module, "truncated section header"))?;
            if s.offset
                .checked_add(s.size)
                .is_none_or(|end| end > data.len())
            {
                return Err(bad(module, format!("section {i} lies outside the file")));
            }
            sections.push(s);
        }
        let names = sections[strndx];
        Ok(Elf {
            data,
            sections,
            names,
        })
    }

    /// The NUL-terminated string at `at` of string table `table`.
    fn string(&self, table: Section, at: u32) -> &'a [u8] {
        let bytes = &self.data[table.offset..table.offset + table.size];
        let tail = bytes.get(at as usize..).unwrap_or(&[]);
        &tail[..tail.iter().position(|&b| b == 0).unwrap_or(tail.len())]
    }

    fn section(&self, name: &str) -> Option<Section> {
        self.sections
            .iter()
            .copied()
            .find(|s| self.string(self.names, s.name) == name.as_bytes())
    }

    /// Index in `.symtab` of the symbol called `name`.
    fn symbol(&self, name: &str) -> Option<u32> {
        let symtab = self.section(".symtab")?;
        let strtab = *self.sections.get(symtab.link as usize)?;
        (0..symtab.size / 24).find_map(|i| {
            let st_name = u32_at(self.data, symtab.offset + i * 24)?;
            (self.string(strtab, st_name) == name.as_bytes()).then_some(i as u32)
        })
    }
}

/// Raise `kernel`'s register allocation in `cubin` to at least `regs`
/// per thread and return the allocation it now has (the larger of `regs`
/// and what ptxas gave it). The code is unchanged; `module` names the
/// source in errors.
///
/// # Errors
/// `Cubin` when `regs` exceeds [`MAX_REGISTERS_PER_THREAD`], or the cubin
/// has no such kernel, no register count for it, or a layout other than
/// the one described in the module docs.
pub(crate) fn raise_register_count(
    cubin: &mut [u8],
    module: &str,
    kernel: &str,
    regs: u32,
) -> Result<u32> {
    if regs > MAX_REGISTERS_PER_THREAD {
        return Err(bad(
            module,
            format!("register floor {regs} for {kernel} exceeds {MAX_REGISTERS_PER_THREAD}"),
        ));
    }
    let (slot, have) = {
        let elf = Elf::parse(cubin, module)?;
        let sym = elf
            .symbol(kernel)
            .ok_or_else(|| bad(module, format!("no symbol {kernel}")))?;
        let info = elf
            .section(".nv.info")
            .ok_or_else(|| bad(module, "no .nv.info section"))?;
        find_regcount(&cubin[info.offset..info.offset + info.size], sym)
            .map_err(|what| bad(module, format!("{what} (kernel {kernel})")))?
            .map(|(at, have)| (info.offset + at, have))
            .ok_or_else(|| bad(module, format!("no register count for {kernel}")))?
    };
    let new = have.max(regs);
    cubin[slot..slot + 4].copy_from_slice(&new.to_le_bytes());
    Ok(new)
}

/// Offset (within `info`) of the register count of symbol `sym`, and its
/// value.
fn find_regcount(info: &[u8], sym: u32) -> std::result::Result<Option<(usize, u32)>, String> {
    let mut at = 0;
    while at < info.len() {
        let (format, attr) = match read::<2>(info, at) {
            Some([f, a]) => (f, a),
            None => return Err("truncated .nv.info entry".into()),
        };
        at += 2;
        match format {
            EIFMT_NVAL => {}
            EIFMT_BVAL => at += 1,
            EIFMT_HVAL => at += 2,
            EIFMT_SVAL => {
                let size = u16_at(info, at).ok_or("truncated .nv.info size")? as usize;
                at += 2;
                if at + size > info.len() {
                    return Err(".nv.info entry runs past its section".into());
                }
                if attr == EIATTR_REGCOUNT && size == 8 && u32_at(info, at) == Some(sym) {
                    let have = u32_at(info, at + 4).ok_or("truncated register count")?;
                    return Ok(Some((at + 4, have)));
                }
                at += size;
            }
            other => return Err(format!("unknown .nv.info format {other:#04x}")),
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal cubin-shaped ELF64: null, .shstrtab, .strtab, .symtab
    /// (null symbol and `k`), .nv.info with a few entries and k's count.
    fn tiny(regs: u32) -> Vec<u8> {
        let shstr = b"\0.shstrtab\0.strtab\0.symtab\0.nv.info\0".to_vec();
        let strtab = b"\0other\0k\0".to_vec();
        let mut symtab = vec![0u8; 24];
        let mut k = vec![0u8; 24];
        k[..4].copy_from_slice(&7u32.to_le_bytes()); // "k"
        symtab.extend_from_slice(&k);
        let mut info = vec![
            EIFMT_HVAL, 0x10, 1, 0, EIFMT_BVAL, 0x11, 3, EIFMT_NVAL, 0x12,
        ];
        info.extend_from_slice(&[EIFMT_SVAL, EIATTR_REGCOUNT, 8, 0]);
        info.extend_from_slice(&5u32.to_le_bytes()); // another symbol
        info.extend_from_slice(&40u32.to_le_bytes());
        info.extend_from_slice(&[EIFMT_SVAL, EIATTR_REGCOUNT, 8, 0]);
        info.extend_from_slice(&1u32.to_le_bytes()); // k
        info.extend_from_slice(&regs.to_le_bytes());
        let bodies = [shstr, strtab, symtab, info];
        let mut data = vec![0u8; 64];
        let mut offsets = Vec::new();
        for b in &bodies {
            offsets.push(data.len());
            data.extend_from_slice(b);
        }
        let shoff = data.len();
        let names = [0u32, 1, 11, 19, 27];
        let mut sh = vec![0u8; 64]; // null section
        for (i, b) in bodies.iter().enumerate() {
            let mut h = vec![0u8; 64];
            h[..4].copy_from_slice(&names[i + 1].to_le_bytes());
            h[24..32].copy_from_slice(&(offsets[i] as u64).to_le_bytes());
            h[32..40].copy_from_slice(&(b.len() as u64).to_le_bytes());
            if i == 2 {
                h[40..44].copy_from_slice(&2u32.to_le_bytes()); // .symtab -> .strtab
            }
            sh.extend_from_slice(&h);
        }
        data.extend_from_slice(&sh);
        data[..6].copy_from_slice(b"\x7fELF\x02\x01");
        data[0x28..0x30].copy_from_slice(&(shoff as u64).to_le_bytes());
        data[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
        data[0x3c..0x3e].copy_from_slice(&5u16.to_le_bytes());
        data[0x3e..0x40].copy_from_slice(&1u16.to_le_bytes());
        data
    }

    fn count_of_k(c: &[u8]) -> u32 {
        let elf = Elf::parse(c, "t").unwrap();
        let info = elf.section(".nv.info").unwrap();
        find_regcount(&c[info.offset..info.offset + info.size], 1)
            .unwrap()
            .unwrap()
            .1
    }

    #[test]
    fn raises_only_the_named_kernel_and_never_lowers() {
        let mut c = tiny(28);
        let before = c.clone();
        assert_eq!(raise_register_count(&mut c, "t", "k", 48).unwrap(), 48);
        assert_eq!(count_of_k(&c), 48);
        let changed: Vec<usize> = (0..c.len()).filter(|&i| c[i] != before[i]).collect();
        assert_eq!(changed.len(), 1, "only the low byte of k's count changes");
        // A floor below the current count leaves it.
        assert_eq!(raise_register_count(&mut c, "t", "k", 32).unwrap(), 48);
        assert_eq!(count_of_k(&c), 48);
    }

    #[test]
    fn bad_input_is_an_error() {
        let mut c = tiny(28);
        for (kernel, regs, want) in [
            ("missing", 48, "no symbol missing"),
            ("k", 256, "exceeds 255"),
        ] {
            let e = raise_register_count(&mut c, "t", kernel, regs).unwrap_err();
            assert!(e.to_string().contains(want), "{e}");
        }
        let mut no_count = tiny(28);
        let n = no_count.len();
        // Point k's entry at symbol 9: the cubin then has no count for k.
        let info = {
            let elf = Elf::parse(&no_count, "t").unwrap();
            elf.section(".nv.info").unwrap()
        };
        let at = info.offset + info.size - 8;
        no_count[at..at + 4].copy_from_slice(&9u32.to_le_bytes());
        let e = raise_register_count(&mut no_count, "t", "k", 48).unwrap_err();
        assert!(e.to_string().contains("no register count for k"), "{e}");
        assert_eq!(no_count.len(), n);
        let mut junk = b"not an elf at all".to_vec();
        assert!(raise_register_count(&mut junk, "t", "k", 48).is_err());
        let mut truncated = tiny(28);
        truncated.truncate(100);
        assert!(raise_register_count(&mut truncated, "t", "k", 48).is_err());
        let mut bad_format = tiny(28);
        let at = info.offset;
        bad_format[at] = 0x09;
        let e = raise_register_count(&mut bad_format, "t", "k", 48).unwrap_err();
        assert!(e.to_string().contains("unknown .nv.info format"), "{e}");
    }
}
