// Real Guava on the Java side of the Guava-file tests (tests/guava_files.rs):
//   write FILE N P ITEMS   BloomFilter.create(stringFunnel(UTF_8), N, P), put each
//                          line of ITEMS, writeTo(FILE)
//   read FILE PROBES       readFrom(FILE); print 1 or 0 per line of PROBES (mightContain)
// Items are read from files as UTF-8, so the platform's charset plays no part.
import com.google.common.hash.BloomFilter;
import com.google.common.hash.Funnels;
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.nio.file.*;
import java.util.List;

public class GuavaFiles {
    public static void main(String[] args) throws IOException {
        if (args[0].equals("write")) {
            BloomFilter<CharSequence> f = BloomFilter.create(
                Funnels.stringFunnel(StandardCharsets.UTF_8), Long.parseLong(args[2]), Double.parseDouble(args[3]));
            for (String item : lines(args[4])) f.put(item);
            try (OutputStream out = new FileOutputStream(args[1])) { f.writeTo(out); }
        } else {
            BloomFilter<CharSequence> f;
            try (InputStream in = new FileInputStream(args[1])) {
                f = BloomFilter.readFrom(in, Funnels.stringFunnel(StandardCharsets.UTF_8));
            }
            StringBuilder out = new StringBuilder();
            for (String item : lines(args[2])) out.append(f.mightContain(item) ? '1' : '0');
            System.out.println(out);
        }
    }

    static List<String> lines(String path) throws IOException {
        return Files.readAllLines(Paths.get(path), StandardCharsets.UTF_8);
    }
}
